-- job_cancel_running: Marks running jobs (by ids, or by queue and task) for cancellation; the worker's heartbeat reads the mark, and the job ends failed 'cancelled by operator' when its task stops.
UPDATE pgkick.jobs
SET cancel_requested_at = coalesce(cancel_requested_at, coalesce(%(now)s::timestamptz, now()))
WHERE status = 'running'
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
RETURNING id, queue;
