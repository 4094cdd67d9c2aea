-- job_retry_failed: Puts failed jobs (by ids, or by queue and task) back in the queue with more attempts, never more than 1000 in all (a job that used 1000 stays failed); attempts keep counting up, so fencing stays sound; a cancel mark is cleared.
UPDATE pgkick.jobs
SET status       = 'queued',
    run_at       = coalesce(%(now)s::timestamptz, now()),
    finished_at  = NULL,
    max_attempts = least(attempts + %(extra_attempts)s::int, 1000),
    cancel_requested_at = NULL  -- a job cancelled while running may be retried: a fresh start
WHERE status = 'failed'
  AND attempts < 1000
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
RETURNING id, queue;
