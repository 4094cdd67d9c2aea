-- queue_limit_prune: Drops a queue's row once it limits nothing (no running limit, rate or concurrency, not paused), so its claims take the plain branch again; forgets its rate's starts and its round-robin cursor with it.
WITH dropped AS (
  DELETE FROM pgkick.queue_limits
  WHERE queue = %(queue)s AND max_running IS NULL AND rate_limit IS NULL
    AND concurrency IS NULL AND NOT paused
  RETURNING queue
), starts AS (
  DELETE FROM pgkick.job_starts s USING dropped d WHERE s.queue = d.queue
)
DELETE FROM pgkick.queue_claim_cursors c USING dropped d WHERE c.queue = d.queue;
