-- 0035_job_lapsed: jobs.lapsed, true while a job's previous attempt ended with its lease running out (its worker vanished: SIGKILL, OOM, a segfault, Lambda's timeout), so it may be the job that kills its worker; the claim returns it (job_claim and job_complete_and_claim recreated with the new return shape, their plans and grants kept), a worker runs such suspects last and marks each started (job_lapsed_start) just before it runs, and the reaper gives back the attempt of a suspect that never started.
-- Why (a review of the lease core, 2026-12-06): the claim counts an attempt for every job of
-- its batch, and the reaper could not tell a job that ran from one that never started. A
-- job that killed its worker took an attempt from each job claimed with it, every time; the
-- reaped batch kept its order, so the same poison job was claimed first with the same
-- batch-mates: poison first in a batch of 5 (max_attempts 3), three kills, and its 4
-- batch-mates ended `failed`, `lease expired (attempt 3 of 3)`, never started once.
-- Now a batch-mate loses at most the first attempt (when nothing was known yet): after it,
-- it is a suspect; a suspect not marked started when its lease lapses again is given back
-- its attempt, and a fresh job claimed with suspects runs, and is completed, before them.
-- A poison job is marked started each time it kills its worker, so it is charged each time.
-- Given back by raising max_attempts by one, not by taking one off attempts (`pgkick retry`'s
-- rule): attempts is the fencing token, and the worker whose lease lapsed may be alive
-- (frozen, its heartbeat cut off); given `attempts - 1`, the next claim would hand out the
-- token it still holds, and its start mark and completion would land on the new owner's row.
-- Where lapsed is cleared: by the start mark alone (and by an operator's retry, a fresh
-- start). Every outcome a worker records for a suspect (complete, fail, snooze, continue, a
-- cancel of a running job) comes after its mark, and a fresh job's flag is false already,
-- so the hot path writes nothing more: the claim cannot clear it (the reaper must read it
-- from the attempt that lapsed), and an outcome's statement would carry one more column
-- for every job to clear a flag almost never set. A suspect given back unstarted at the
-- worker's reserve keeps it: it never ran. A column with a constant default is catalog
-- only (PostgreSQL 11+): no table rewrite.
ALTER TABLE jobs ADD COLUMN lapsed boolean NOT NULL DEFAULT false;

-- A function's return shape cannot be changed in place and a dropped function loses its
-- grants: as in 0012, the grants an operator gave other roles are kept and given again
-- (pgkick's own roles get theirs from role_setup, which `migrate` runs again). A role that
-- may write a job's attempts (a worker's, to fence; a rescue reaps as the worker) may write
-- the new flag and the attempts a give-back raises.
CREATE TEMPORARY TABLE pgkick_0035_grants ON COMMIT DROP AS
SELECT p.oid::regprocedure::text AS function_name, a.grantee
FROM pg_catalog.pg_proc AS p,
     LATERAL aclexplode(p.proacl) AS a
WHERE p.pronamespace = current_schema()::regnamespace
  AND p.proname IN ('job_claim', 'job_complete_and_claim')
  AND p.proacl IS NOT NULL
  AND a.privilege_type = 'EXECUTE';

DO $grant$
DECLARE
  role_oid oid;
BEGIN
  FOR role_oid IN
    SELECT DISTINCT a.grantee
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'attempts'
      AND a.privilege_type = 'UPDATE'
  LOOP
    EXECUTE format('GRANT UPDATE (lapsed, max_attempts) ON jobs TO %s',
                   CASE WHEN role_oid = 0 THEN 'PUBLIC' ELSE role_oid::regrole::text END);
  END LOOP;
END
$grant$;

-- job_complete_and_claim returns job_claim's rows: both go, and come back with the new shape.
DROP FUNCTION job_complete_and_claim(bigint[], int[], text[], text, int, interval, timestamptz);
DROP FUNCTION job_claim(text, int, interval, timestamptz);

-- The claim of 0029, unchanged but for the column it returns (its branches and plan choices
-- are 0007's, 0011's, 0014's and 0029's: read them there). It writes no flag.
CREATE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                                     claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz, lapsed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $claim$
#variable_conflict use_column
DECLARE
  at timestamptz := coalesce(claim_now, now());
  lim record;
  free int;
  fair_ids bigint[];
BEGIN
  IF NOT EXISTS (SELECT 1 FROM queue_limits l WHERE l.queue = claim_queue)
     AND (SELECT min(g.group_key) FROM jobs g
          WHERE g.queue = claim_queue AND g.group_key IS NOT NULL AND g.status = 'queued')
         IS NULL
     AND (SELECT min(g.group_key) FROM jobs g
          WHERE g.queue = claim_queue AND g.group_key IS NOT NULL AND g.status = 'running')
         IS NULL
  THEN
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
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed
         FROM claimed c
    ORDER BY c.priority DESC, c.run_at, c.id;
    RETURN;
  END IF;

  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('pgkick.claim'), hashtext(claim_queue));
  -- From here the claim is timed by the clock, not by its transaction's start (0029): the
  -- lock may have been waited for, and a rate's starts are recorded at `at`.
  IF claim_now IS NULL THEN
    at := clock_timestamp();
  END IF;
  SELECT l.max_running, l.rate_limit, l.rate_period, l.concurrency, l.paused INTO lim
  FROM queue_limits l WHERE l.queue = claim_queue;
  IF lim.paused THEN
    RETURN;  -- a paused queue: nothing is claimed until `pgkick resume`
  END IF;
  IF lim.rate_limit IS NOT NULL OR lim.concurrency IS NOT NULL THEN
    free := claim_batch;
    IF lim.max_running IS NOT NULL THEN
      free := least(free, lim.max_running - (SELECT count(*) FROM jobs r
                                             WHERE r.queue = claim_queue
                                               AND r.status = 'running')::int);
    END IF;
    IF free <= 0 THEN
      RETURN;
    END IF;
    fair_ids := job_claim_fair_ids(claim_queue, free, at, lim.rate_limit, lim.rate_period,
                                   coalesce(lim.concurrency, 1));
    RETURN QUERY
    WITH claimed AS (
      UPDATE jobs j
      SET status       = 'running',
          attempts     = j.attempts + 1,
          locked_until = at + claim_lease,
          claimed_at   = at  -- the instant its start is recorded at (job_claim_fair_ids)
      WHERE j.id = ANY (fair_ids)
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed
         FROM claimed c
    ORDER BY array_position(fair_ids, c.id);
    RETURN;
  END IF;
  RETURN QUERY
  WITH next AS (
    -- 0011's head rule (read it there): one running job a group, its head only.
    SELECT j.id, j.priority, j.run_at FROM jobs j
    WHERE j.queue = claim_queue AND j.status = 'queued' AND j.run_at <= at
      AND (j.group_key IS NULL
           OR (NOT EXISTS (SELECT 1 FROM jobs g
                           WHERE g.queue = j.queue AND g.group_key = j.group_key
                             AND g.group_key IS NOT NULL AND g.status = 'running')
               AND NOT EXISTS (SELECT 1 FROM jobs g
                               WHERE g.queue = j.queue AND g.group_key = j.group_key
                                 AND g.group_key IS NOT NULL AND g.status = 'queued'
                                 AND (-g.priority, g.ordered_at, g.id)
                                     < (-j.priority, j.ordered_at, j.id))))
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
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed
         FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;

-- The round trip of 0012, unchanged but for the column it returns.
CREATE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],
                                       done_results text[], claim_queue text,
                                       claim_batch int, claim_lease interval,
                                       claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz, lapsed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $round$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int,
         NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
         NULL::boolean
  FROM job_complete(done_ids, done_attempts, done_results, claim_now) AS done;
  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);
END
$round$;

-- The grants the old functions had (none on a fresh install: role_setup gives them).
DO $regrant$
DECLARE
  kept record;
BEGIN
  FOR kept IN SELECT DISTINCT function_name FROM pgkick_0035_grants LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', kept.function_name);
  END LOOP;
  FOR kept IN SELECT * FROM pgkick_0035_grants LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', kept.function_name,
                   CASE WHEN kept.grantee = 0 THEN 'PUBLIC' ELSE kept.grantee::regrole::text END);
  END LOOP;
END
$regrant$;
