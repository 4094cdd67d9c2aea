-- 0036_advisory_locks_per_schema: the advisory lock keys of the claim (job_claim, a queue with a limit or groups) and of debounce and throttle (job_insert_flow) name the install's schema, so two installs in one database never wait on each other's locks; the install in schema pgkick keeps its keys. Both functions: their latest bodies (0035's, 0030's), same signature, answers and grants, but for the key.
-- Why (a review of several installs in one database, 2026-12-06): advisory locks are the
-- database's, not a schema's. The keys named the queue (`pgkick.claim`, the queue) or the
-- unique key (`pgkick.flow:` and the key) alone, so an app transaction of install `a` holding
-- a debounced key stalled install `b`'s debounce of the same key (another app's) until it
-- ended, and each install's claims of a limited queue waited on the other's claims of its
-- namesake. The key is the schema's for any install but `pgkick` (the default, and the only
-- one of most databases): there it is unchanged, so nothing crosses over while it migrates.
-- Elsewhere, a claim already running when this migration commits holds the old key while the
-- next takes the new one: once, for that instant, a limit may be passed by one batch.
-- CREATE OR REPLACE keeps each function's owner and grants; each says again its SECURITY
-- DEFINER (job_insert_flow) and its search_path (FROM CURRENT: this migration's, as 0025's).
CREATE OR REPLACE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
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

CREATE OR REPLACE FUNCTION job_insert_flow(f_queue text, f_task text, f_payload jsonb, f_run_at timestamptz,
                                f_delay interval, f_max_attempts int, f_priority int,
                                f_group text, f_key text, f_traceparent text, f_tracestate text,
                                f_debounce interval, f_max_delay interval, f_throttle interval,
                                f_now timestamptz)
RETURNS TABLE (id bigint, queue text, run_at timestamptz, touched boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT
AS $flow$
#variable_conflict use_column
DECLARE
  -- The caller's clock (tests' injected one) is taken only from a session that is this
  -- function's owner, or one of its members, which could write the same rows itself: from
  -- anyone else, a clock years ahead set a held job's due time as far (0026). Without it,
  -- the clock once the key's lock is held (below; 0030).
  at timestamptz := CASE WHEN f_now IS NOT NULL
                              AND pg_has_role(session_user, current_user, 'MEMBER')
                         THEN f_now END;
  due timestamptz;
  held record;
BEGIN
  IF f_key IS NULL OR (f_debounce IS NULL) = (f_throttle IS NULL) THEN
    RAISE EXCEPTION 'job_insert_flow: a unique key and exactly one of debounce and throttle'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Refused before any write, as the client refuses them (pgkick.validation.flow): a NULL
  -- payload failed the debounce's update of the key's job, and the server's "failing row"
  -- detail then showed the caller that job's columns, read with this function's rights.
  IF f_queue IS NULL OR f_task IS NULL OR f_payload IS NULL THEN
    RAISE EXCEPTION 'job_insert_flow: a queue, a task and a payload'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF NOT coalesce(f_debounce, f_throttle) > interval '0'
     OR coalesce(f_debounce, f_throttle) > interval '30 days'
     OR f_max_delay <= interval '0' OR f_max_delay > interval '30 days' THEN
    RAISE EXCEPTION 'job_insert_flow: debounce, throttle and max_delay above 0, at most 30 days'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- The key names the schema (0036): another install's key so spelt is another key.
  PERFORM pg_advisory_xact_lock(hashtextextended(
    CASE current_schema() WHEN 'pgkick' THEN 'pgkick.flow:'
    ELSE 'pgkick.flow@' || current_schema() || ':' END || f_key, 0));
  IF at IS NULL THEN
    at := clock_timestamp();  -- not now(): the app's transaction may have begun long before
  END IF;
  due := CASE
    WHEN f_debounce IS NULL THEN coalesce(f_run_at, at + f_delay)
    ELSE at + least(f_debounce, coalesce(f_max_delay, f_debounce))
  END;
  FOR attempt IN 1..50 LOOP
    IF f_throttle IS NOT NULL THEN
      -- The key's newest job, whatever its status: made within the period, it is the answer.
      SELECT j.id, j.queue, j.run_at INTO held FROM jobs j
      WHERE j.unique_key = f_key AND j.created_at > at - f_throttle
      ORDER BY j.id DESC LIMIT 1;
      IF FOUND THEN
        RETURN QUERY SELECT held.id, held.queue, held.run_at, false;
        RETURN;
      END IF;
    END IF;
    SELECT j.id, j.queue, j.task, j.run_at, j.status, j.created_at INTO held FROM jobs j
    WHERE j.unique_key = f_key AND j.status IN ('waiting', 'queued', 'running');
    IF FOUND THEN
      IF f_debounce IS NULL OR held.status = 'running'
         OR held.queue <> f_queue OR held.task <> f_task THEN
        -- Throttle: an older live job holds the key (kept). Debounce: it runs already
        -- (the payload it started with is the one it runs; docs/guide/debounce.md), or it
        -- is another task's or queue's job (0026): a key is one namespace, and its holder
        -- answers, untouched, as a plain unique enqueue's does; a debounce rewrites only
        -- a burst of its own task's jobs.
        RETURN QUERY SELECT held.id, held.queue, held.run_at, false;
        RETURN;
      END IF;
      -- Debounce: the burst goes on; the last payload, due `debounce` after this enqueue,
      -- but never later than max_delay after the burst's first (the job's created_at).
      RETURN QUERY
      UPDATE jobs j
      SET payload = f_payload,
          run_at = least(at + f_debounce, j.created_at + coalesce(f_max_delay, 'infinity')),
          traceparent = f_traceparent, tracestate = f_tracestate
      WHERE j.id = held.id AND j.status IN ('queued', 'waiting')
      RETURNING j.id, j.queue, j.run_at, true;
      IF FOUND THEN
        RETURN;
      END IF;
      CONTINUE;  -- claimed meanwhile (a worker takes no lock of ours): look again
    END IF;
    RETURN QUERY
    INSERT INTO jobs AS j (queue, task, payload, run_at, max_attempts, priority, group_key,
                           unique_key, traceparent, tracestate, created_at)
    VALUES (f_queue, f_task, f_payload, due, f_max_attempts, f_priority, f_group, f_key,
            f_traceparent, f_tracestate, at)
    ON CONFLICT (unique_key)
      WHERE unique_key IS NOT NULL AND status IN ('waiting', 'queued', 'running')
    DO NOTHING
    RETURNING j.id, j.queue, j.run_at, true;
    IF FOUND THEN
      RETURN;
    END IF;
    -- A plain unique enqueue of the key (which takes no lock) got in first: look again.
  END LOOP;
  RAISE EXCEPTION 'unique_key %: its job kept changing under a debounce or throttle; try again',
    f_key USING ERRCODE = 'serialization_failure';
END
$flow$;
