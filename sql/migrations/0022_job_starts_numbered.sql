-- 0022_job_starts_numbered: a rate's window counted in two index probes a key, not one row read a start: each start of a key gets the next number of that key (job_starts.seq) and a time no earlier than the key's last start, so the starts in a window are the numbers from its first to the key's last; job_claim_fair_ids (0021's: same signature, rules and claims) and job_ready_fair_count (0014's: same answer) count them so.
-- Why: the claim counted a key's starts in the window row by row (an index entry and, for
-- starts younger than the last vacuum, a heap visit each): a key started at its rate keeps
-- up to rate_limit starts in its window, and a head was checked in ~1.3 us a start (13 us
-- at 10 starts, ~100 us at 350; docs/guide/flow-control.md). Two probes cost the same
-- at 10 starts and stay there at any number.
-- The count holds because a key's numbers and times rise together: a claim whose now()
-- (its transaction's start) is older than the key's last start, recorded by a claim that
-- took the queue's lock first, records its start at that last start's time. That start is
-- counted at least as long as at its own time, so no window of the recorded times holds
-- more than the rate (0014's rule, which counts from at - period with no upper bound). The
-- prunes (this claim's, two periods on; the reaper's, job_start_purge_stale) delete a key's
-- oldest starts, never one between two that stay, so the numbers in a window have no gap.
-- Starts are written only here, under the queue's claim lock: a key's next number is read
-- after the last claim's commit.
-- job_ready_fair_count (0014's ready checks) counts its windows the same way. queue_heal_plan,
-- which books a held key's wake-up from the rate_limit-th newest start, still reads the
-- window (once a sweep, for the held keys only).
ALTER TABLE job_starts ADD COLUMN seq bigint;
UPDATE job_starts s SET seq = n.seq
FROM (SELECT ctid AS row_at,
             row_number() OVER (PARTITION BY queue, rate_key ORDER BY started_at) AS seq
      FROM job_starts) n
WHERE s.ctid = n.row_at;
ALTER TABLE job_starts ALTER COLUMN seq SET NOT NULL;
-- Ordered by time then number (the same order, as they rise together): the window's first
-- start is a forward probe from at - period, the key's last a backward one.
DROP INDEX job_starts_key_idx;
CREATE INDEX job_starts_key_idx ON job_starts (queue, rate_key, started_at, seq);

CREATE OR REPLACE FUNCTION job_claim_fair_ids(claim_queue text, claim_free int, at timestamptz,
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
  -- and its bucket's last start before this claim, number and time (NULL: none, or no rate):
  -- the next starts' numbers and earliest time, read where the rate is checked
  rlast bigint[] := '{}';
  rlast_at timestamptz[] := '{}';
  last_seq bigint;
  last_at timestamptz;
  stop_key text;
  fast_ids bigint[];
  fast_rkeys text[];
  fast_rlast bigint[];
  fast_rlast_at timestamptz[];
  fast_keys text[];
  fast_distinct boolean;
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
  -- The common case in one statement (no PL/pgSQL step a key): lap 1 over the keys after
  -- the cursor, each key's head if its group has room and its rate key a start left, the
  -- walk stopping (a recursive CTE runs on demand) once claim_free heads are found. Taken
  -- only if it fills the batch with distinct rate keys (each key's room was counted for
  -- one start) and every row locks; else the walk below does the whole claim.
  -- The cursor is read in the same statement, and the walk's last key and whether its rate
  -- keys are distinct come out of it too: no statement of its own for any of them.
  WITH cursor_at (k) AS MATERIALIZED (
    SELECT coalesce((SELECT c.after_key FROM queue_claim_cursors c
                     WHERE c.queue = claim_queue), ''))
  SELECT array_agg(f.id ORDER BY f.n), array_agg(f.rk ORDER BY f.n),
         array_agg(f.k ORDER BY f.n), bool_and(f.rk = f.k), (SELECT cursor_at.k FROM cursor_at),
         array_agg(f.last_seq ORDER BY f.n), array_agg(f.last_at ORDER BY f.n)
  INTO fast_ids, fast_rkeys, fast_keys, fast_distinct, stop_key, fast_rlast, fast_rlast_at
  FROM (
    -- Each step is one index probe: the first queued job after the last key in the keys'
    -- index order is the next key's first job, its head unless it is a rate-keyed job not
    -- due yet (then the head is looked up: the key's first due or grouped job).
    WITH RECURSIVE walk (n, k, id, group_key, rate_key, run_at) AS (
      (SELECT 1, coalesce(j.group_key, j.rate_key), j.id, j.group_key, j.rate_key, j.run_at
       FROM jobs j
       WHERE j.queue = claim_queue AND j.status = 'queued'
         AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)
         AND coalesce(j.group_key, j.rate_key) > (SELECT cursor_at.k FROM cursor_at)
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
    SELECT w.n, w.k, h.id, coalesce(h.rate_key, '') AS rk, st.last_seq, st.last_at
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
         -- the head's rate key's last start (its number and time), with a rate only
         LEFT JOIN LATERAL (SELECT s.seq AS last_seq, s.started_at AS last_at
                            FROM job_starts s
                            WHERE rate_n IS NOT NULL AND s.queue = claim_queue
                              AND s.rate_key = coalesce(h.rate_key, '')
                            ORDER BY s.started_at DESC, s.seq DESC LIMIT 1) st ON true
    WHERE h.run_at <= at
      AND (h.group_key IS NULL
           OR (SELECT count(*) FROM jobs r
               WHERE r.queue = claim_queue AND r.group_key = h.group_key
                 AND r.group_key IS NOT NULL AND r.status = 'running') < per_key)
      AND (rate_n IS NULL
           OR coalesce(st.last_seq
                     - (SELECT s.seq FROM job_starts s
                        WHERE s.queue = claim_queue AND s.rate_key = coalesce(h.rate_key, '')
                          AND s.started_at > at - rate_span
                        ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0) < rate_n)
    LIMIT claim_free
  ) f;
  IF cardinality(fast_ids) = claim_free
     -- a batch whose every rate key is its walk key has distinct rate keys (the walk's keys
     -- are); only a batch mixing group keys with other rate keys needs them counted
     AND (rate_n IS NULL OR fast_distinct
          OR (SELECT count(DISTINCT r) FROM unnest(fast_rkeys) AS r) = claim_free)
     AND cardinality(ARRAY(SELECT j.id FROM jobs j
                           WHERE j.id = ANY (fast_ids) AND j.status = 'queued'
                           FOR UPDATE SKIP LOCKED)) = claim_free
  THEN
    ids := fast_ids;
    rkeys := fast_rkeys;
    rlast := fast_rlast;
    rlast_at := fast_rlast_at;
    last_taken := fast_keys[claim_free];
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
          last_seq := NULL;
          last_at := NULL;
          IF rate_n IS NOT NULL THEN
            SELECT s.seq, s.started_at INTO last_seq, last_at FROM job_starts s
            WHERE s.queue = claim_queue AND s.rate_key = ''
            ORDER BY s.started_at DESC, s.seq DESC LIMIT 1;
            used := coalesce(last_seq
                      - (SELECT s.seq FROM job_starts s
                         WHERE s.queue = claim_queue AND s.rate_key = ''
                           AND s.started_at > at - rate_span
                         ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0)
                    + coalesce(cardinality(array_positions(rkeys, '')), 0);
            EXIT WHEN used >= rate_n;
          END IF;
          PERFORM 1 FROM jobs j WHERE j.id = cand.id AND j.status = 'queued'
            FOR UPDATE SKIP LOCKED;
          CONTINUE WHEN NOT FOUND;
          ids := ids || cand.id;
          rkeys := rkeys || ''::text;
          rlast := rlast || last_seq;
          rlast_at := rlast_at || last_at;
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
          last_seq := NULL;
          last_at := NULL;
          IF rate_n IS NOT NULL THEN
            SELECT s.seq, s.started_at INTO last_seq, last_at FROM job_starts s
            WHERE s.queue = claim_queue AND s.rate_key = rk
            ORDER BY s.started_at DESC, s.seq DESC LIMIT 1;
            used := coalesce(last_seq
                      - (SELECT s.seq FROM job_starts s
                         WHERE s.queue = claim_queue AND s.rate_key = rk
                           AND s.started_at > at - rate_span
                         ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0)
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
          rlast := rlast || last_seq;
          rlast_at := rlast_at || last_at;
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
  IF cardinality(ids) > 0 THEN
    -- One statement for the three writes (each statement's start-up is a share of a claim
    -- that takes ten jobs). Starts are counted from at - period with no upper bound: a
    -- claim whose now() (its transaction's start) is older than a start recorded by a claim
    -- that took the lock first still counts that start, so no window of the starts' own
    -- times ever holds more than rate_n. The keys started here lose their starts older than
    -- two periods (a period more than needed, for the same reason): a key keeps at most the
    -- starts of the two periods before its last claim. A claim that took a job took it
    -- from a bucket, so the cursor moves whenever ids is not empty. Each start is numbered
    -- after its bucket's last (read where its rate was checked: no probe here) and timed no
    -- earlier than it; two starts of one bucket in this claim take two numbers.
    WITH pruned AS (
      DELETE FROM job_starts s
      WHERE rate_n IS NOT NULL AND s.queue = claim_queue AND s.rate_key = ANY (rkeys)
        AND s.started_at <= at - 2 * rate_span
    ), started AS (
      INSERT INTO job_starts (queue, rate_key, started_at, seq)
      SELECT claim_queue, u.rk, greatest(at, u.last_at),
             coalesce(u.last_seq, 0) + row_number() OVER (PARTITION BY u.rk)
      FROM unnest(rkeys, rlast, rlast_at) AS u (rk, last_seq, last_at)
      WHERE rate_n IS NOT NULL
    )
    INSERT INTO queue_claim_cursors AS c (queue, after_key) VALUES (claim_queue, last_taken)
    ON CONFLICT (queue) DO UPDATE SET after_key = excluded.after_key;
  END IF;
  RETURN ids;
END
$fair$;

-- 0014's read-only count of what job_claim_fair_ids would take now (the ready checks' answer
-- for a queue with a rate or a concurrency), its windows counted the same way: it runs at
-- every hand-over and sweep, and a queue whose keys are all held by their rate (the case
-- the sweep is for) had every key's window read row by row. Same signature and answer.
CREATE OR REPLACE FUNCTION job_ready_fair_count(ready_queue text, at timestamptz, up_to int)
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
     AND coalesce((SELECT s.seq FROM job_starts s
                WHERE s.queue = ready_queue AND s.rate_key = ''
                ORDER BY s.started_at DESC, s.seq DESC LIMIT 1)
               - (SELECT s.seq FROM job_starts s
                  WHERE s.queue = ready_queue AND s.rate_key = ''
                    AND s.started_at > at - lim.rate_period
                  ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0) >= lim.rate_limit
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
                   OR coalesce((SELECT s.seq FROM job_starts s
                              WHERE s.queue = ready_queue AND s.rate_key = keys.k
                              ORDER BY s.started_at DESC, s.seq DESC LIMIT 1)
                             - (SELECT s.seq FROM job_starts s
                                WHERE s.queue = ready_queue AND s.rate_key = keys.k
                                  AND s.started_at > at - lim.rate_period
                                ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0) < lim.rate_limit))
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
                      OR coalesce((SELECT s.seq FROM job_starts s
                                 WHERE s.queue = ready_queue AND s.rate_key = coalesce(h.rate_key, '')
                                 ORDER BY s.started_at DESC, s.seq DESC LIMIT 1)
                                - (SELECT s.seq FROM job_starts s
                                   WHERE s.queue = ready_queue AND s.rate_key = coalesce(h.rate_key, '')
                                     AND s.started_at > at - lim.rate_period
                                   ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0) < lim.rate_limit)))
      LIMIT up_to - unkeyed) f);
END
$ready$;
