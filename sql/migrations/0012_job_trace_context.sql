-- 0012_job_trace_context: the W3C trace context of the span that enqueued a job (traceparent, tracestate), stored with it and returned by the claim (job_claim and job_complete_and_claim recreated with the new return shape: traceparent, tracestate, enqueued_at, run_at, claimed_at), so a worker can run the job in a span that is a child of the enqueuer's (pgkick[otel], docs/guide/tracing.md).
-- Why columns, not the payload: the payload is the app's, given to its task as it was
-- enqueued; a trace context in it would show up in the task's input and in its unique
-- keys' meaning. NULL when the producer had no active span (or no OpenTelemetry): a NULL
-- costs no storage beyond the row's null bitmap.
ALTER TABLE jobs ADD COLUMN traceparent text, ADD COLUMN tracestate text;

-- A function's return shape cannot be changed in place (CREATE OR REPLACE refuses it), and
-- a dropped function loses its grants. pgkick's own roles get theirs back from role_setup,
-- which `migrate` runs again after applying migrations where the roles were set up; the
-- grants an operator gave other roles (a read-only dashboard's, a second worker role's)
-- are kept here and given again to the new functions, and every role that may insert a
-- payload may insert the new columns, as the producer's statements now name them.
CREATE TEMPORARY TABLE pgkick_0012_grants ON COMMIT DROP AS
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
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'payload'
      AND a.privilege_type = 'INSERT'
  LOOP
    EXECUTE format('GRANT INSERT (traceparent, tracestate) ON jobs TO %s',
                   CASE WHEN role_oid = 0 THEN 'PUBLIC' ELSE role_oid::regrole::text END);
  END LOOP;
END
$grant$;

-- job_complete_and_claim returns job_claim's rows: both go, and come back with the new shape.
DROP FUNCTION job_complete_and_claim(bigint[], int[], text[], text, int, interval, timestamptz);
DROP FUNCTION job_claim(text, int, interval, timestamptz);

-- The claim of 0011, unchanged but for the columns it returns (its plan choices, the
-- unlocked branch and the locked one, are 0007's and 0011's: read them there).
CREATE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                          claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $claim$
#variable_conflict use_column
DECLARE
  at timestamptz := coalesce(claim_now, now());
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
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
    ORDER BY c.priority DESC, c.run_at, c.id;
    RETURN;
  END IF;

  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('pgkick.claim'), hashtext(claim_queue));
  RETURN QUERY
  WITH next AS (
    -- A grouped job is claimed only as its group's head (no queued job of the group before
    -- it in the group's fixed order) and while none of its group runs: the head is unique,
    -- so one claim takes at most one job of a group.
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
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;

-- The round trip of 0010, unchanged but for the columns it returns.
CREATE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],
                                       done_results text[], claim_queue text,
                                       claim_batch int, claim_lease interval,
                                       claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $round$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int,
         NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz
  FROM job_complete(done_ids, done_attempts, done_results, claim_now) AS done;
  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);
END
$round$;

-- The grants the old functions had (none on a fresh install: role_setup gives them).
DO $regrant$
DECLARE
  kept record;
BEGIN
  FOR kept IN SELECT DISTINCT function_name FROM pgkick_0012_grants LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', kept.function_name);
  END LOOP;
  FOR kept IN SELECT * FROM pgkick_0012_grants LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', kept.function_name,
                   CASE WHEN kept.grantee = 0 THEN 'PUBLIC' ELSE kept.grantee::regrole::text END);
  END LOOP;
END
$regrant$;
