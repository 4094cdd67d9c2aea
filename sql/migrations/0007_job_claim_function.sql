-- 0007_job_claim_function: the claim as one server-side function, job_claim(queue, batch, lease, now): one statement for every queue, groups and limits included, whose plans the server keeps per session (issue 16's claim cost).
-- Why a function (pgkick.groups has the rules): the claim used to be the plain statement,
-- or, for a queue with a running limit or live grouped jobs, four (BEGIN, the lock, the
-- claim, COMMIT), each planned by the server at every call: pgkick never prepares a
-- statement, so that transaction-mode poolers work. PL/pgSQL keeps the plans of the
-- statements inside a function in the session's cache, which a pooler cannot break (no
-- statement names cross the wire), and a VOLATILE function takes a fresh snapshot for
-- each statement under READ COMMITTED: the claim that follows the lock sees every claim
-- committed before the lock was granted, as the serialised claim's own statement did.
-- The search_path is the one this migration ran with (pgkick's schema), whatever the
-- caller's.
CREATE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                          claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $claim$
#variable_conflict use_column
DECLARE
  at timestamptz := coalesce(claim_now, now());
BEGIN
  -- min() rather than EXISTS: its plan is one probe of the groups' partial index even
  -- where the statistics expect many grouped rows (another queue's), when EXISTS may be
  -- planned as a scan of the table that stops at the first match: none in this queue.
  IF NOT EXISTS (SELECT 1 FROM queue_limits l WHERE l.queue = claim_queue)
     AND (SELECT min(g.group_key) FROM jobs g
          WHERE g.queue = claim_queue AND g.group_key IS NOT NULL AND g.status = 'queued')
         IS NULL
     AND (SELECT min(g.group_key) FROM jobs g
          WHERE g.queue = claim_queue AND g.group_key IS NOT NULL AND g.status = 'running')
         IS NULL
  THEN
    -- No limit, no live group: the plain claim, no lock. A grouped job committed since
    -- the check above is left to the next claim, which will see it and lock.
    RETURN QUERY
    WITH next AS (
      SELECT j.id FROM jobs j
      WHERE j.queue = claim_queue AND j.status = 'queued' AND j.run_at <= at
        AND j.group_key IS NULL
      ORDER BY j.priority DESC, j.run_at
      LIMIT claim_batch
      FOR UPDATE SKIP LOCKED
    ),
    claimed AS (
      UPDATE jobs j
      SET status       = 'running',
          attempts     = j.attempts + 1,
          locked_until = at + claim_lease,
          claimed_at   = coalesce(claim_now, clock_timestamp())
      WHERE j.id = ANY (ARRAY (SELECT next.id FROM next))
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts FROM claimed c
    ORDER BY c.priority DESC, c.run_at, c.id;  -- claim order (the update's is the index's)
    RETURN;
  END IF;

  -- Held until the caller's transaction ends; the statement below starts after it is
  -- granted, so its snapshot has every claim of this queue committed before: true under
  -- READ COMMITTED only (a REPEATABLE READ transaction keeps its first snapshot, and a
  -- limit would be passed silently), so anything else is refused.
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('pgkick.claim'), hashtext(claim_queue));
  RETURN QUERY
  WITH next AS (
    SELECT j.id, j.priority, j.run_at FROM jobs j
    WHERE j.queue = claim_queue AND j.status = 'queued' AND j.run_at <= at
      AND (j.group_key IS NULL
           OR (NOT EXISTS (SELECT 1 FROM jobs g
                           WHERE g.queue = j.queue AND g.group_key = j.group_key
                             AND g.group_key IS NOT NULL AND g.status = 'running')
               AND (j.attempts > 0
                    OR (NOT EXISTS (SELECT 1 FROM jobs g
                                    WHERE g.queue = j.queue AND g.group_key = j.group_key
                                      AND g.group_key IS NOT NULL AND g.status = 'queued'
                                      AND g.attempts > 0)
                        AND NOT EXISTS (SELECT 1 FROM jobs g
                                        WHERE g.queue = j.queue AND g.group_key = j.group_key
                                          AND g.group_key IS NOT NULL AND g.status = 'queued'
                                          AND (-g.priority, g.run_at, g.id)
                                              < (-j.priority, j.run_at, j.id))))))
    ORDER BY j.priority DESC, j.run_at
    LIMIT claim_batch
    FOR UPDATE SKIP LOCKED
  ),
  room AS (
    SELECT CASE WHEN l.max_running IS NULL THEN claim_batch
                ELSE l.max_running - (SELECT count(*) FROM jobs r
                                      WHERE r.queue = claim_queue AND r.status = 'running')
           END AS free
    FROM (SELECT 1) AS one LEFT JOIN queue_limits l ON l.queue = claim_queue
  ),
  ranked AS (
    SELECT next.id, row_number() OVER (ORDER BY next.priority DESC, next.run_at, next.id) AS n
    FROM next
  ),
  claimed AS (
    UPDATE jobs j
    SET status       = 'running',
        attempts     = j.attempts + 1,
        locked_until = at + claim_lease,
        claimed_at   = coalesce(claim_now, clock_timestamp())
    WHERE j.id = ANY (ARRAY (SELECT ranked.id FROM ranked
                             WHERE ranked.n <= (SELECT free FROM room)))
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;
