-- 0014_queue_rate_concurrency_pause: rate limits per key (N starts per sliding period: jobs.rate_key, queue_limits.rate_limit/rate_period, job_starts), concurrency per group key with a round-robin claim across keys (queue_limits.concurrency, queue_claim_cursors), and queue pause (queue_limits.paused); job_claim enforces all of them (issue 33, pgkick.store.flow has the rules).
-- Why a table of starts, not jobs.claimed_at: a job retried or snoozed inside the window is
-- claimed again and its claimed_at overwritten; the first start would be forgotten and the
-- window counted one short. A start is a row written by the claim that made it, under the
-- queue's claim lock, so "N per period" is exact under any number of workers.
ALTER TABLE queue_limits
  ALTER COLUMN max_running DROP NOT NULL,
  ADD COLUMN rate_limit int CHECK (rate_limit >= 1),
  ADD COLUMN rate_period interval
    CHECK (rate_period >= interval '1 second' AND rate_period <= interval '1 day'),
  ADD COLUMN concurrency int CHECK (concurrency >= 1),
  ADD COLUMN paused boolean NOT NULL DEFAULT false,
  ADD CONSTRAINT queue_limits_rate_whole CHECK ((rate_limit IS NULL) = (rate_period IS NULL));

ALTER TABLE jobs ADD COLUMN rate_key text,
  ADD CONSTRAINT jobs_rate_key_named CHECK (rate_key <> '');

-- One row per job started in a queue with a rate ('' : the queue's own bucket, for jobs
-- without a rate_key); pruned by the claim two periods on.
CREATE TABLE job_starts (
  queue      text        NOT NULL,
  rate_key   text        NOT NULL,
  started_at timestamptz NOT NULL
);
-- One index: the claim counts a key's window and prunes the keys it starts through it (an
-- index on (queue, started_at) would tempt a generic plan to count a key's window by
-- scanning every key's).
CREATE INDEX job_starts_key_idx ON job_starts (queue, rate_key, started_at);

-- Where the round-robin claim of a queue left off: the last key it took a job of
-- ('' : the bucket of jobs with neither key).
CREATE TABLE queue_claim_cursors (
  queue     text PRIMARY KEY CHECK (queue <> ''),
  after_key text
);

-- A rate-keyed job gets its fixed place (ordered_at) as a grouped one does (0011).
DROP TRIGGER jobs_ordered_at ON jobs;
CREATE TRIGGER jobs_ordered_at BEFORE INSERT ON jobs
FOR EACH ROW WHEN (NEW.group_key IS NOT NULL OR NEW.rate_key IS NOT NULL)
EXECUTE FUNCTION job_ordered_at_set();

-- The round-robin claim walks a queue's keys (a group key, else a rate key) one index probe
-- at a time and takes each key's first jobs in its fixed order.
CREATE INDEX jobs_key_queued_idx ON jobs (queue, (coalesce(group_key, rate_key)), (-priority),
                                          ordered_at, id)
  WHERE status = 'queued' AND (group_key IS NOT NULL OR rate_key IS NOT NULL);

-- The round-robin claim of a queue with a rate or a concurrency: called by job_claim under
-- the queue's claim lock (READ COMMITTED: each statement here sees every claim committed
-- before the lock). Returns the ids to claim and writes the starts and the cursor.
CREATE FUNCTION job_claim_fair_ids(claim_queue text, claim_free int, at timestamptz,
                                   rate_n int, rate_span interval, per_key int)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
-- Its statements on job_starts are planned once per session: a session whose first claim
-- found the table vacuumed empty kept a sequential scan of it for every count and prune,
-- slower with each start it recorded (x7.9..x9.2 of the plain claim after an autovacuum
-- of the empty table, against x1.2..x1.4; docs/guide/flow-control.md). Its index is the
-- only sensible path at any size.
SET enable_seqscan = off
AS $fair$
#variable_conflict use_column
DECLARE
  ids bigint[] := '{}';
  rkeys text[] := '{}';  -- the rate bucket of each id taken ('' : the queue's)
  stop_key text;
  fast_ids bigint[];
  fast_rkeys text[];
  fast_last text;
  wrapped boolean;
  k text;
  last_taken text;
  lap int;
  share int;
  lap_taken int;
  key_taken int;
  g_running int;
  g_seen int;
  used int;
  rk text;
  cand record;
BEGIN
  SELECT c.after_key INTO stop_key FROM queue_claim_cursors c WHERE c.queue = claim_queue;
  stop_key := coalesce(stop_key, '');
  -- The common case in one statement (no PL/pgSQL step a key): lap 1 over the keys after
  -- the cursor, each key's head if its group has room and its rate key a start left, the
  -- walk stopping (a recursive CTE runs on demand) once claim_free heads are found. Taken
  -- only if it fills the batch with distinct rate keys (each key's room was counted for
  -- one start) and every row locks; else the walk below does the whole claim.
  SELECT array_agg(f.id ORDER BY f.n), array_agg(f.rk ORDER BY f.n),
         (array_agg(f.k ORDER BY f.n DESC))[1]
  INTO fast_ids, fast_rkeys, fast_last
  FROM (
    -- Each step is one index probe: the first queued job after the last key in the keys'
    -- index order is the next key's first job, its head unless it is a rate-keyed job not
    -- due yet (then the head is looked up: the key's first due or grouped job).
    WITH RECURSIVE walk (n, k, id, group_key, rate_key, run_at) AS (
      (SELECT 1, coalesce(j.group_key, j.rate_key), j.id, j.group_key, j.rate_key, j.run_at
       FROM jobs j
       WHERE j.queue = claim_queue AND j.status = 'queued'
         AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)
         AND coalesce(j.group_key, j.rate_key) > stop_key
       ORDER BY coalesce(j.group_key, j.rate_key), -j.priority, j.ordered_at, j.id LIMIT 1)
      UNION ALL
      SELECT w.n + 1, nx.k, nx.id, nx.group_key, nx.rate_key, nx.run_at
      FROM walk w,
           LATERAL (SELECT coalesce(j.group_key, j.rate_key) AS k, j.id, j.group_key,
                           j.rate_key, j.run_at
                    FROM jobs j
                    WHERE j.queue = claim_queue AND j.status = 'queued'
                      AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)
                      AND coalesce(j.group_key, j.rate_key) > w.k
                    ORDER BY coalesce(j.group_key, j.rate_key), -j.priority, j.ordered_at, j.id
                    LIMIT 1) nx
    )
    SELECT w.n, w.k, h.id, coalesce(h.rate_key, '') AS rk
    FROM walk w,
         LATERAL (SELECT w.id, w.group_key, w.rate_key, w.run_at
                  WHERE w.group_key IS NOT NULL OR w.run_at <= at
                  UNION ALL
                  (SELECT j.id, j.group_key, j.rate_key, j.run_at FROM jobs j
                   WHERE j.queue = claim_queue AND j.status = 'queued'
                     AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)
                     AND coalesce(j.group_key, j.rate_key) = w.k
                     AND (j.group_key IS NOT NULL OR j.run_at <= at)
                   ORDER BY -j.priority, j.ordered_at, j.id LIMIT 1)
                  LIMIT 1) h
    WHERE h.run_at <= at
      AND (h.group_key IS NULL
           OR (SELECT count(*) FROM jobs r
               WHERE r.queue = claim_queue AND r.group_key = h.group_key
                 AND r.group_key IS NOT NULL AND r.status = 'running') < per_key)
      AND (rate_n IS NULL
           OR (SELECT count(*) FROM job_starts s
               WHERE s.queue = claim_queue AND s.rate_key = coalesce(h.rate_key, '')
                 AND s.started_at > at - rate_span) < rate_n)
    LIMIT claim_free
  ) f;
  IF cardinality(fast_ids) = claim_free
     AND (rate_n IS NULL
          OR (SELECT count(DISTINCT r) FROM unnest(fast_rkeys) AS r) = claim_free)
     AND cardinality(ARRAY(SELECT j.id FROM jobs j
                           WHERE j.id = ANY (fast_ids) AND j.status = 'queued'
                           FOR UPDATE SKIP LOCKED)) = claim_free
  THEN
    ids := fast_ids;
    rkeys := fast_rkeys;
    last_taken := fast_last;
  END IF;
  FOR lap IN 1..2 LOOP
    EXIT WHEN cardinality(ids) >= claim_free;  -- the statement above filled the batch
    -- Lap 1 takes at most one job a key (the round robin: a quiet key's job rides in the
    -- next batch whatever another key's backlog); lap 2 fills the batch from any key.
    share := CASE WHEN lap = 1 THEN 1 ELSE claim_free END;
    lap_taken := 0;
    k := stop_key;
    wrapped := false;
    LOOP
      -- The next bucket after k, cyclic: the keys in order, then '' (jobs with no key). A
      -- lap starts after the bucket the last claim took from and ends with that bucket.
      IF k = '' THEN
        k := (SELECT min(coalesce(j.group_key, j.rate_key)) FROM jobs j
              WHERE j.queue = claim_queue AND j.status = 'queued'
                AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL));
      ELSE
        k := (SELECT min(coalesce(j.group_key, j.rate_key)) FROM jobs j
              WHERE j.queue = claim_queue AND j.status = 'queued'
                AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)
                AND coalesce(j.group_key, j.rate_key) > k);
      END IF;
      k := coalesce(k, '');
      EXIT WHEN wrapped AND (k = '' OR k > stop_key);  -- past the lap's last bucket
      key_taken := 0;
      IF k = '' THEN
        -- Jobs with neither key: the first hundred in claim order (a backlog of keyed jobs
        -- ahead of them is served key by key, so they come forward).
        FOR cand IN
          SELECT f.id FROM (SELECT j.id, j.group_key, j.rate_key FROM jobs j
                            WHERE j.queue = claim_queue AND j.status = 'queued'
                              AND j.run_at <= at
                            ORDER BY j.priority DESC, j.run_at LIMIT 100) f
          WHERE f.group_key IS NULL AND f.rate_key IS NULL
        LOOP
          EXIT WHEN key_taken >= share OR cardinality(ids) >= claim_free;
          CONTINUE WHEN cand.id = ANY (ids);
          IF rate_n IS NOT NULL THEN
            used := (SELECT count(*) FROM job_starts s
                     WHERE s.queue = claim_queue AND s.rate_key = ''
                       AND s.started_at > at - rate_span)
                    + coalesce(cardinality(array_positions(rkeys, '')), 0);
            EXIT WHEN used >= rate_n;
          END IF;
          PERFORM 1 FROM jobs j WHERE j.id = cand.id AND j.status = 'queued'
            FOR UPDATE SKIP LOCKED;
          CONTINUE WHEN NOT FOUND;
          ids := ids || cand.id;
          rkeys := rkeys || ''::text;
          key_taken := key_taken + 1;
        END LOOP;
      ELSE
        g_running := NULL;
        g_seen := 0;
        FOR cand IN
          SELECT j.id, j.group_key, j.rate_key, j.run_at FROM jobs j
          WHERE j.queue = claim_queue AND j.status = 'queued'
            AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)
            AND coalesce(j.group_key, j.rate_key) = k
            AND (j.group_key IS NOT NULL OR j.run_at <= at)
          ORDER BY -j.priority, j.ordered_at, j.id
        LOOP
          EXIT WHEN key_taken >= share OR cardinality(ids) >= claim_free;
          IF cand.group_key IS NOT NULL THEN
            -- A group runs at most per_key jobs at once, its first ones in its fixed order
            -- (0011's head rule when per_key is 1): a head not due yet holds its place.
            IF g_running IS NULL THEN
              g_running := (SELECT count(*) FROM jobs r
                            WHERE r.queue = claim_queue AND r.group_key = cand.group_key
                              AND r.group_key IS NOT NULL AND r.status = 'running');
            END IF;
            g_seen := g_seen + 1;
            EXIT WHEN g_running + g_seen > per_key;
            CONTINUE WHEN cand.run_at > at OR cand.id = ANY (ids);
          ELSIF cand.id = ANY (ids) THEN
            CONTINUE;
          END IF;
          rk := coalesce(cand.rate_key, '');
          IF rate_n IS NOT NULL THEN
            used := (SELECT count(*) FROM job_starts s
                     WHERE s.queue = claim_queue AND s.rate_key = rk
                       AND s.started_at > at - rate_span)
                    + coalesce(cardinality(array_positions(rkeys, rk)), 0);
            IF used >= rate_n THEN
              EXIT WHEN cand.group_key IS NULL;  -- the key's bucket is its rate key: all held
              CONTINUE;  -- a head held by its rate keeps its place in its group
            END IF;
          END IF;
          PERFORM 1 FROM jobs j WHERE j.id = cand.id AND j.status = 'queued'
            FOR UPDATE SKIP LOCKED;
          CONTINUE WHEN NOT FOUND;
          ids := ids || cand.id;
          rkeys := rkeys || rk;
          key_taken := key_taken + 1;
        END LOOP;
      END IF;
      IF key_taken > 0 THEN
        last_taken := k;
        lap_taken := lap_taken + key_taken;
      END IF;
      EXIT WHEN cardinality(ids) >= claim_free OR k = stop_key;
      wrapped := wrapped OR k = '';
    END LOOP;
    EXIT WHEN cardinality(ids) >= claim_free OR lap_taken = 0;
  END LOOP;
  IF rate_n IS NOT NULL AND cardinality(ids) > 0 THEN
    -- Starts are counted from at - period with no upper bound: a claim whose now() (its
    -- transaction's start) is older than a start recorded by a claim that took the lock
    -- first still counts that start, so no window of the starts' own times ever holds
    -- more than rate_n. The keys started here lose their starts older than two periods
    -- (a period more than needed, for the same reason): a key keeps at most the starts
    -- of the two periods before its last claim.
    DELETE FROM job_starts s
    WHERE s.queue = claim_queue AND s.rate_key = ANY (rkeys)
      AND s.started_at <= at - 2 * rate_span;
    INSERT INTO job_starts (queue, rate_key, started_at)
    SELECT claim_queue, r, at FROM unnest(rkeys) AS r;
  END IF;
  IF last_taken IS NOT NULL THEN
    INSERT INTO queue_claim_cursors AS c (queue, after_key) VALUES (claim_queue, last_taken)
    ON CONFLICT (queue) DO UPDATE SET after_key = excluded.after_key;
  END IF;
  RETURN ids;
END
$fair$;

-- What job_claim_fair_ids would take now, read only (no lock, no start, no cursor): the
-- ready checks' answer for a queue with a rate or a concurrency (job_ready_exists asks for 1,
-- job_ready_count_by_queue for all). A function, so those statements (run at every hand-over
-- and reap) stay as cheap to plan for queues without limits as they were; its own plans are
-- kept by the session. Counts the ready jobs with neither key if the queue's bucket has a
-- start left, plus one for each key with a ready job its rate and its group's concurrency
-- admit (a group's first `concurrency` jobs in its order, less those running).
CREATE FUNCTION job_ready_fair_count(ready_queue text, at timestamptz, up_to int)
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off  -- as job_claim_fair_ids: job_starts through its index at any size
AS $ready$
#variable_conflict use_column
DECLARE
  lim record;
  unkeyed bigint;
BEGIN
  SELECT l.rate_limit, l.rate_period, l.concurrency, l.paused INTO lim
  FROM queue_limits l WHERE l.queue = ready_queue;
  IF NOT FOUND OR lim.paused THEN
    RETURN 0;
  END IF;
  unkeyed := (SELECT count(*) FROM (SELECT 1 FROM jobs j
                                    WHERE j.queue = ready_queue AND j.status = 'queued'
                                      AND j.group_key IS NULL AND j.rate_key IS NULL
                                      AND j.run_at <= at
                                    LIMIT up_to) u);
  IF unkeyed > 0 AND lim.rate_limit IS NOT NULL
     AND (SELECT count(*) FROM job_starts s
          WHERE s.queue = ready_queue AND s.rate_key = ''
            AND s.started_at > at - lim.rate_period) >= lim.rate_limit
  THEN
    unkeyed := 0;  -- the queue's own bucket has no start left
  END IF;
  IF unkeyed >= up_to THEN
    RETURN unkeyed;
  END IF;
  RETURN unkeyed + (
    SELECT count(*) FROM (
      WITH RECURSIVE keys (k) AS (  -- the queue's keys with queued jobs, one probe each
        SELECT (SELECT min(coalesce(j.group_key, j.rate_key)) FROM jobs j
                WHERE j.queue = ready_queue AND j.status = 'queued'
                  AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL))
        UNION ALL
        SELECT (SELECT min(coalesce(j.group_key, j.rate_key)) FROM jobs j
                WHERE j.queue = ready_queue AND j.status = 'queued'
                  AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)
                  AND coalesce(j.group_key, j.rate_key) > keys.k)
        FROM keys WHERE keys.k IS NOT NULL
      )
      SELECT 1 FROM keys
      WHERE keys.k IS NOT NULL
        AND ((EXISTS (SELECT 1 FROM jobs j  -- a rate key's ungrouped jobs
                      WHERE j.queue = ready_queue AND j.status = 'queued'
                        AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)
                        AND coalesce(j.group_key, j.rate_key) = keys.k
                        AND j.group_key IS NULL AND j.run_at <= at)
              AND (lim.rate_limit IS NULL
                   OR (SELECT count(*) FROM job_starts s
                       WHERE s.queue = ready_queue AND s.rate_key = keys.k
                         AND s.started_at > at - lim.rate_period) < lim.rate_limit))
          OR EXISTS (  -- a group's first jobs its concurrency leaves room for
               SELECT 1 FROM (
                 SELECT h.run_at, h.rate_key FROM jobs h
                 WHERE h.queue = ready_queue AND h.group_key = keys.k AND h.status = 'queued'
                 ORDER BY -h.priority, h.ordered_at, h.id
                 LIMIT greatest(coalesce(lim.concurrency, 1)
                                - (SELECT count(*) FROM jobs r
                                   WHERE r.queue = ready_queue AND r.group_key = keys.k
                                     AND r.status = 'running'), 0)) h
               WHERE h.run_at <= at
                 AND (lim.rate_limit IS NULL
                      OR (SELECT count(*) FROM job_starts s
                          WHERE s.queue = ready_queue
                            AND s.rate_key = coalesce(h.rate_key, '')
                            AND s.started_at > at - lim.rate_period) < lim.rate_limit)))
      LIMIT up_to - unkeyed) f);
END
$ready$;

-- The claim of 0012 (same signature, return shape and grants: CREATE OR REPLACE keeps them;
-- job_complete_and_claim calls it by name and is unchanged). The plain branch is 0012's,
-- untouched. The locked branch now reads the queue's row first: a paused queue claims
-- nothing; a queue with a rate or a concurrency is claimed round-robin by
-- job_claim_fair_ids; any other is claimed by 0012's statement, unchanged.
CREATE OR REPLACE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
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
          claimed_at   = coalesce(claim_now, clock_timestamp())
      WHERE j.id = ANY (fair_ids)
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
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
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;

-- Roles an operator made (not pgkick's own: role_setup, run again by `migrate`, grants
-- theirs): a role that claims (may update a job's status) now records starts and cursors in
-- its claims and reads the starts in its sweeps; a role that inserts payloads may name a
-- rate key and reads the pause flag when it reserves its kick.
DO $grant$
DECLARE
  role_name text;
BEGIN
  FOR role_name IN
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'status' AND a.privilege_type = 'UPDATE'
    UNION
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_class AS t, LATERAL aclexplode(t.relacl) AS a
    WHERE t.oid = 'jobs'::regclass AND a.privilege_type = 'UPDATE'
  LOOP
    EXECUTE format('GRANT SELECT, INSERT, DELETE ON job_starts TO %s', role_name);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON queue_claim_cursors TO %s', role_name);
  END LOOP;
  FOR role_name IN
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'payload' AND a.privilege_type = 'INSERT'
    UNION
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_class AS t, LATERAL aclexplode(t.relacl) AS a
    WHERE t.oid = 'jobs'::regclass AND a.privilege_type = 'INSERT'
  LOOP
    EXECUTE format('GRANT INSERT (rate_key) ON jobs TO %s', role_name);
    EXECUTE format('GRANT SELECT (queue, paused) ON queue_limits TO %s', role_name);
  END LOOP;
END
$grant$;
