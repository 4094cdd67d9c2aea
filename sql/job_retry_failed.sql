-- job_retry_failed: Puts failed jobs (by ids, or by queue and task) back in the queue with more attempts; attempts keep counting up, so fencing stays sound.
UPDATE jobs
SET status       = 'queued',
    run_at       = coalesce(%(now)s::timestamptz, now()),
    finished_at  = NULL,
    max_attempts = attempts + %(extra_attempts)s
WHERE status = 'failed'
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
RETURNING id, queue;
