-- job_complete_and_claim_plain: A worker's round trip in one statement: job_complete_many for the batch it finished, then job_claim_plain (their text, as CTEs: tests/test_claim.py checks it). Every row carries the ids the complete still held; then a claimed job, or none (id NULL), or, when the queue has a limit or live grouped jobs, serialise = true: the caller then takes the serialised claim.
WITH completed AS (
  UPDATE pgkick.jobs j
  SET status = 'done', locked_until = NULL,
      finished_at = coalesce(%(now)s::timestamptz, now()),
      result = held.result::jsonb
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(results)s::text[])
       AS held(id, attempts, result)
  WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
  RETURNING j.id
),
gate AS (
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
),
got AS (
  SELECT id, queue, task, payload, attempts, max_attempts, false AS serialise FROM claimed
  UNION ALL
  SELECT NULL, NULL, NULL, NULL, NULL, NULL, true FROM gate WHERE serialise
)
SELECT (SELECT coalesce(array_agg(id), '{}') FROM completed) AS held, got.serialise,
       got.id, got.queue, got.task, got.payload, got.attempts, got.max_attempts
FROM (SELECT 1) AS one LEFT JOIN got ON true;
