-- job_retry_failed: Puts failed jobs (by ids, or by queue and task) back in the queue with more attempts, never more than 1000 in all (a job that used 1000 stays failed); attempts keep counting up, so fencing stays sound; a cancel mark is cleared. A selected job that a parent's failure ended (its last_error says so, policy fail or cancel), whose failed parent this retry selects too, is left to that parent: migration 0019's trigger revives it as waiting, so it runs after its parent, not beside it.
UPDATE pgkick.jobs AS j
SET status       = 'queued',
    run_at       = coalesce(%(now)s::timestamptz, now()),
    finished_at  = NULL,
    max_attempts = least(j.attempts + %(extra_attempts)s::int, 1000),
    cancel_requested_at = NULL  -- a job cancelled while running may be retried: a fresh start
WHERE j.status = 'failed'
  AND j.attempts < 1000
  AND (%(ids)s::bigint[] IS NULL OR j.id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
  AND (%(task)s::text IS NULL OR j.task = %(task)s)
  AND NOT (coalesce(j.last_error, '') ~ '^(cancelled: )?parent job [0-9]+ failed: ' AND EXISTS (
    SELECT 1
    FROM pgkick.job_dependencies d JOIN pgkick.jobs p ON p.id = d.parent_id
    WHERE d.child_id = j.id AND d.policy <> 'run anyway'
      AND p.status = 'failed'
      AND p.attempts < 1000
      AND (%(ids)s::bigint[] IS NULL OR p.id = ANY(%(ids)s::bigint[]))
      AND (%(queue)s::text IS NULL OR p.queue = %(queue)s)
      AND (%(task)s::text IS NULL OR p.task = %(task)s)
  ))
RETURNING j.id, j.queue;
