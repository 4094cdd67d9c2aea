-- job_retry_failed: Puts failed jobs (by ids, or by queue and task) back in the queue with more attempts, never more than 1000 in all (a job that used 1000 stays failed); attempts keep counting up, so fencing stays sound; a cancel mark and a lapsed lease's suspicion (migration 0035) are cleared. With `error` (a bulk retry's --error), only the jobs whose last error still contains that text (case-insensitive), checked on the row's latest version: one retried by someone else since it was selected and failed again with another error is left failed. A selected job that a parent's failure ended (its last_error says so, policy fail or cancel), whose failed parent this retry selects too, is left to that parent: migration 0019's trigger revives it as waiting, so it runs after its parent, not beside it. A job with parents still to finish waits for them again (waiting, counted), and one whose parent under fail or cancel is failed and not retried here stays failed (the CLI names that parent first: job_retry_blocked_by_parents).
WITH selected AS (
  SELECT j.id FROM pgkick.jobs AS j
  WHERE j.status = 'failed'
    AND j.attempts < 1000
    AND (%(ids)s::bigint[] IS NULL OR j.id = ANY(%(ids)s::bigint[]))
    AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
    AND (%(task)s::text IS NULL OR j.task = %(task)s)
    AND (%(error)s::text IS NULL OR strpos(lower(j.last_error), lower(%(error)s::text)) > 0)
    AND NOT (coalesce(j.last_error, '') ~ '^(cancelled: )?parent job [0-9]+ failed: ' AND EXISTS (
      SELECT 1
      FROM pgkick.job_dependencies d JOIN pgkick.jobs p ON p.id = d.parent_id
      WHERE d.child_id = j.id AND d.policy <> 'run anyway'
        AND p.status = 'failed'
        AND p.attempts < 1000
        AND (%(ids)s::bigint[] IS NULL OR p.id = ANY(%(ids)s::bigint[]))
        AND (%(queue)s::text IS NULL OR p.queue = %(queue)s)
        AND (%(task)s::text IS NULL OR p.task = %(task)s)
        AND (%(error)s::text IS NULL OR strpos(lower(p.last_error), lower(%(error)s::text)) > 0)
    ))
), parents AS (
  -- Their parents, locked in id order before they are counted and read as locked (the
  -- latest version): none finishes between this count and this commit (its completion
  -- then finds the job waiting, and counts it off), as migration 0019's revival does.
  SELECT p.id, p.status FROM pgkick.jobs AS p
  WHERE p.id IN (SELECT d.parent_id FROM pgkick.job_dependencies AS d
                 WHERE d.child_id IN (SELECT selected.id FROM selected))
  ORDER BY p.id
  FOR SHARE
), counted AS (
  SELECT d.child_id,
         count(*) FILTER (WHERE pa.status NOT IN ('done', 'failed'))::int AS pending,
         bool_or(d.policy <> 'run anyway' AND pa.status = 'failed') AS blocked
  FROM pgkick.job_dependencies AS d JOIN parents AS pa ON pa.id = d.parent_id
  WHERE d.child_id IN (SELECT selected.id FROM selected)
  GROUP BY d.child_id
)
UPDATE pgkick.jobs AS j
SET status       = CASE WHEN coalesce(c.pending, 0) > 0 THEN 'waiting' ELSE 'queued' END,
    waiting_on   = coalesce(c.pending, 0),
    run_at       = coalesce(%(now)s::timestamptz, now()),
    finished_at  = NULL,
    max_attempts = least(j.attempts + %(extra_attempts)s::int, 1000),
    cancel_requested_at = NULL,  -- a job cancelled while running may be retried: a fresh start
    lapsed       = false  -- and no longer a suspect (migration 0035)
FROM selected AS s LEFT JOIN counted AS c ON c.child_id = s.id
WHERE j.id = s.id AND NOT coalesce(c.blocked, false)
  AND j.status = 'failed'  -- re-checked on the row's latest version: a concurrent retry or claim wins
  AND (%(error)s::text IS NULL OR strpos(lower(j.last_error), lower(%(error)s::text)) > 0)
RETURNING j.id, j.queue;
