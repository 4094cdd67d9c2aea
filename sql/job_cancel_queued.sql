-- job_cancel_queued: Fails queued or waiting jobs (by ids, or by queue and task) with last_error 'cancelled by operator' (a waiting one's count of parents cleared, and its own dependants then settled by the dependency trigger); running jobs are left to finish.
UPDATE pgkick.jobs
SET status      = 'failed',
    waiting_on  = 0,
    finished_at = coalesce(%(now)s::timestamptz, now()),
    last_error  = 'cancelled by operator'
WHERE status IN ('queued', 'waiting')
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
RETURNING id, queue;
