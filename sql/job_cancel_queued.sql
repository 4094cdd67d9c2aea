-- job_cancel_queued: Fails queued jobs (by ids, or by queue and task) with last_error 'cancelled by operator'; running jobs are left to finish.
UPDATE pgkick.jobs
SET status      = 'failed',
    finished_at = coalesce(%(now)s::timestamptz, now()),
    last_error  = 'cancelled by operator'
WHERE status = 'queued'
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
RETURNING id, queue;
