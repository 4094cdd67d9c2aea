-- job_claim_before_groups: The claim as it was before migration 0004 (run_at order, no groups or limits): the baseline the bench holds the new claim against.
WITH next AS (
  SELECT id FROM pgkick.jobs
  WHERE queue = %(queue)s AND status = 'queued'
    AND run_at <= coalesce(%(now)s::timestamptz, now())
  ORDER BY run_at
  LIMIT %(batch)s
  FOR UPDATE SKIP LOCKED
)
UPDATE pgkick.jobs j
SET status       = 'running',
    attempts     = j.attempts + 1,
    locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    claimed_at   = coalesce(%(now)s::timestamptz, clock_timestamp())
FROM next
WHERE j.id = next.id
RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts;
