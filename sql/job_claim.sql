-- job_claim: Claims up to batch ready jobs of a queue, highest priority first then run_at, under a lease, skipping rows other workers hold (FOR UPDATE SKIP LOCKED), grouped jobs (one running per group: its head in claim order, or its job waiting for a retry) and limited queues (at most the limit's room of the batch) only after job_claim_serialise locked the queue.
WITH next AS (
  SELECT id, priority, run_at FROM pgkick.jobs j
  WHERE queue = %(queue)s AND status = 'queued'
    AND run_at <= coalesce(%(now)s::timestamptz, now())
    AND (group_key IS NULL
         OR (current_setting('pgkick.claim_serialised', true) = 'on'
             AND NOT EXISTS (SELECT 1 FROM pgkick.jobs g
                             WHERE g.queue = j.queue AND g.group_key = j.group_key
                               AND g.group_key IS NOT NULL AND g.status = 'running')
             AND (j.attempts > 0
                  OR (NOT EXISTS (SELECT 1 FROM pgkick.jobs g
                                  WHERE g.queue = j.queue AND g.group_key = j.group_key
                                    AND g.group_key IS NOT NULL AND g.status = 'queued'
                                    AND g.attempts > 0)
                      AND NOT EXISTS (SELECT 1 FROM pgkick.jobs g
                                      WHERE g.queue = j.queue AND g.group_key = j.group_key
                                        AND g.group_key IS NOT NULL AND g.status = 'queued'
                                        AND (-g.priority, g.run_at, g.id)
                                            < (-j.priority, j.run_at, j.id))))))
  ORDER BY priority DESC, run_at
  LIMIT %(batch)s
  FOR UPDATE SKIP LOCKED
),
room AS (
  SELECT CASE
           WHEN l.max_running IS NULL THEN %(batch)s
           WHEN current_setting('pgkick.claim_serialised', true) = 'on'
             THEN l.max_running - (SELECT count(*) FROM pgkick.jobs r
                                   WHERE r.queue = %(queue)s AND r.status = 'running')
           ELSE 0
         END AS free
  FROM (SELECT 1) AS one LEFT JOIN pgkick.queue_limits l ON l.queue = %(queue)s
),
ranked AS (
  SELECT id, row_number() OVER (ORDER BY priority DESC, run_at, id) AS n FROM next
)
UPDATE pgkick.jobs j
SET status       = 'running',
    attempts     = j.attempts + 1,
    locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    claimed_at   = coalesce(%(now)s::timestamptz, clock_timestamp())
FROM ranked
WHERE j.id = ranked.id AND ranked.n <= (SELECT free FROM room)
RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts;
