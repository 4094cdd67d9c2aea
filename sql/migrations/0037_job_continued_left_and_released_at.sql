-- 0037_job_continued_left_and_released_at: jobs.continued_left_ms, the time a job's invocation had left (less the worker's reserve) when it continued the job before any step ran (a stalled continuation): the stall guard lets a next step run whatever its estimate only on a claim with at least that much time left, so a job claimed late twice in a row continues again instead of overrunning its invocation; and jobs.released_at, when a dependant's last parent finished, written by job_dependants_settle (0034's) as it releases it and returned by the claim (job_claim and job_complete_and_claim recreated with the new return shape, their plans and grants kept), so a dependant's span measures its wait from its release, not from its enqueue.
-- Why (note 61's leftovers): the stall guard knew only that the last continuation came
-- before any step, not how late that claim was, so the next claim, late again, ran a
-- 10-minute step with 3 minutes left (on Lambda: killed at its timeout, the attempt charged).
-- NULL where nothing was recorded (a job never continued stalled, or stalled before this
-- migration): the guard then lets the step run, as before. A nullable column with no default
-- is catalog only: no table rewrite.
ALTER TABLE jobs ADD COLUMN continued_left_ms int;

-- A dependant's due time (run_at) is its enqueue time: the span's wait_ms (due to claimed,
-- pgkick.worker.job_span) counted its parents' wait and run as its own time in the queue.
-- NULL for a job with no parents, or one released before this migration (the wait is then
-- measured from due, as before). Written by the trigger's owner (SECURITY DEFINER): no
-- grant; the worker reads it through the claim. The plain claim runs no more statements:
-- it is one more column of the rows the claim returns (sent only to a worker that traces).
ALTER TABLE jobs ADD COLUMN released_at timestamptz;

-- A role that may record a continuation (the worker's: UPDATE of continued_stalled) may
-- record the time it had left (role_setup gives pgkick_worker its grant on a fresh install).
DO $grant$
DECLARE
  role_oid oid;
BEGIN
  FOR role_oid IN
    SELECT DISTINCT a.grantee
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'continued_stalled'
      AND a.privilege_type = 'UPDATE'
  LOOP
    EXECUTE format('GRANT UPDATE (continued_left_ms) ON jobs TO %s',
                   CASE WHEN role_oid = 0 THEN 'PUBLIC' ELSE role_oid::regrole::text END);
  END LOOP;
END
$grant$;

-- The release trigger's function: 0034's, but for the time it writes on the dependant it
-- releases. CREATE OR REPLACE keeps its owner, its SECURITY DEFINER and its trigger.
CREATE OR REPLACE FUNCTION job_dependants_settle() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path FROM CURRENT
AS $settle$
DECLARE
  released text;
BEGIN
  IF NEW.status = 'failed' THEN
    UPDATE jobs c
    SET status = 'failed', waiting_on = 0, finished_at = now(),
        last_error = left(CASE WHEN d.policy = 'cancel' THEN 'cancelled: ' ELSE '' END
                          || format('parent job %s failed: %s', NEW.id, NEW.last_error), 2000)
    FROM job_dependencies d
    WHERE d.parent_id = NEW.id AND d.policy <> 'run anyway' AND c.id = d.child_id
      AND c.status = 'waiting';
  END IF;
  WITH counted AS (
    UPDATE jobs c
    SET waiting_on = c.waiting_on - 1,
        status = CASE WHEN c.waiting_on = 1 THEN 'queued' ELSE 'waiting' END,
        -- the moment the last parent finished, on the clock its finish was written with
        released_at = CASE WHEN c.waiting_on = 1 THEN coalesce(NEW.finished_at, now())
                           ELSE c.released_at END
    FROM job_dependencies d
    WHERE d.parent_id = NEW.id AND c.id = d.child_id AND c.status = 'waiting'
      AND (NEW.status = 'done' OR d.policy = 'run anyway')
    RETURNING c.queue, c.status
  )
  SELECT string_agg(DISTINCT queue, E'\n') INTO released FROM counted WHERE status = 'queued';
  IF released IS NOT NULL THEN
    PERFORM set_config('pgkick.released_queues',
                       concat_ws(E'\n', nullif(current_setting('pgkick.released_queues', true), ''),
                                 released), true);
  END IF;
  RETURN NULL;
END
$settle$;

-- A function's return shape cannot be changed in place and a dropped function loses its
-- grants: as in 0035, the grants an operator gave other roles are kept and given again
-- (pgkick's own roles get theirs from role_setup, which `migrate` runs again).
CREATE TEMPORARY TABLE pgkick_0037_grants ON COMMIT DROP AS
SELECT p.oid::regprocedure::text AS function_name, a.grantee
FROM pg_catalog.pg_proc AS p,
     LATERAL aclexplode(p.proacl) AS a
WHERE p.pronamespace = current_schema()::regnamespace
  AND p.proname IN ('job_claim', 'job_complete_and_claim')
  AND p.proacl IS NOT NULL
  AND a.privilege_type = 'EXECUTE';

-- job_complete_and_claim returns job_claim's rows: both go, and come back with the new shape.
DROP FUNCTION job_complete_and_claim(bigint[], int[], text[], text, int, interval, timestamptz);
DROP FUNCTION job_claim(text, int, interval, timestamptz);

-- The claim of 0036, unchanged but for the column it returns (its branches and plan choices
-- are 0007's, 0011's, 0014's, 0029's and 0036's: read them there).
CREATE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                                     claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz, lapsed boolean, released_at timestamptz)
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
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed,
              j.released_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed,
         c.released_at
         FROM claimed c
    ORDER BY c.priority DESC, c.run_at, c.id;
    RETURN;
  END IF;

  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  -- The key names the schema (0036): another install's claim of a queue so named is
  -- none of this one's.
  PERFORM pg_advisory_xact_lock(
    hashtext(CASE current_schema() WHEN 'pgkick' THEN 'pgkick.claim'
             ELSE 'pgkick.claim@' || current_schema() END),
    hashtext(claim_queue));
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
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed,
              j.released_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed,
         c.released_at
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
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed,
              j.released_at
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed,
         c.released_at
         FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;

-- The round trip of 0035, unchanged but for the column it returns.
CREATE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],
                                       done_results text[], claim_queue text,
                                       claim_batch int, claim_lease interval,
                                       claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz, lapsed boolean, released_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $round$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int,
         NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
         NULL::boolean, NULL::timestamptz
  FROM job_complete(done_ids, done_attempts, done_results, claim_now) AS done;
  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);
END
$round$;

-- The grants the old functions had (none on a fresh install: role_setup gives them).
DO $regrant$
DECLARE
  kept record;
BEGIN
  FOR kept IN SELECT DISTINCT function_name FROM pgkick_0037_grants LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', kept.function_name);
  END LOOP;
  FOR kept IN SELECT * FROM pgkick_0037_grants LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', kept.function_name,
                   CASE WHEN kept.grantee = 0 THEN 'PUBLIC' ELSE kept.grantee::regrole::text END);
  END LOOP;
END
$regrant$;
