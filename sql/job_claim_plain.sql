-- job_claim_plain: Claims up to batch ready jobs of a queue (highest priority first then run_at, FOR UPDATE SKIP LOCKED) in one statement, when the queue has no running limit and no live grouped jobs; when it has either, claims nothing and returns one row of NULLs: the caller then takes the serialised claim (job_claim_serialise + job_claim).
WITH gate AS (
  SELECT EXISTS (SELECT 1 FROM pgkick.queue_limits WHERE queue = %(queue)s)
      OR EXISTS (SELECT 1 FROM pgkick.jobs
                 WHERE queue = %(queue)s AND group_key IS NOT NULL AND status = 'queued')
      OR EXISTS (SELECT 1 FROM pgkick.jobs
                 WHERE queue = %(queue)s AND group_key IS NOT NULL AND status = 'running')
         AS serialise
),
next AS (
  SELECT id FROM pgkick.jobs
  WHERE queue = %(queue)s AND status = 'queued'
    AND run_at <= coalesce(%(now)s::timestamptz, now())
    AND group_key IS NULL
    AND NOT (SELECT serialise FROM gate)
  ORDER BY priority DESC, run_at
  LIMIT %(batch)s
  FOR UPDATE SKIP LOCKED
),
claimed AS (
  UPDATE pgkick.jobs j
  SET status       = 'running',
      attempts     = j.attempts + 1,
      locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
      claimed_at   = coalesce(%(now)s::timestamptz, clock_timestamp())
  FROM next
  WHERE j.id = next.id
  RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts
)
SELECT id, queue, task, payload, attempts, max_attempts FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL FROM gate WHERE serialise;
