-- 0031_job_keyless_queued_index: in a queue with a rate or a concurrency, jobs with neither a group nor a rate key are found through an index of their own (jobs_keyless_queued_idx), not among the first hundred queued jobs of every kind: a key held by its limit no longer starves them. job_claim_fair_ids: 0023's, same signature, rules and claims, but for that one statement.
-- Why (a review of the flow control, 2026-12-05): the round robin's bucket of keyless jobs
-- (the queue's own rate key, '') took its candidates from the first hundred queued jobs in
-- claim order, keyed ones included, and kept the keyless among them. With a hundred or more
-- keyed jobs ahead of them that their key's limit held (a rate of 1 an hour and 150 jobs of
-- one key, say), no keyless job was ever a candidate: they waited as long as that key's
-- backlog took to drain, ~100 hours there, though their own bucket had its whole rate
-- left. And job_ready_fair_count counted them ready (it reads keyless jobs alone), so every
-- sweep and the reaper kicked the queue, and each kicked worker claimed nothing. Filtering
-- the keyless jobs in the ready index would read every keyed job ahead of them (a heap visit
-- each: 100,000 held jobs, about 100 ms a claim); their own partial index finds the first in
-- one probe. It costs each keyless job one more index entry when it is queued (enqueue_many
-- measured 161,000 jobs/s against 179,000 without it, one run of six alternated; a single
-- enqueue 455 against 454 us): the price of the rule that a key over its limit blocks no
-- other. job_ready_fair_count's count of keyless jobs takes the same index.
-- The index is built in the migration's transaction, which holds off writes to jobs while
-- it builds (seconds for millions of queued jobs): migrate at a quiet moment.
CREATE INDEX jobs_keyless_queued_idx ON jobs (queue, priority DESC, run_at)
  WHERE status = 'queued' AND group_key IS NULL AND rate_key IS NULL;

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
  -- and the window fact its check read or found (job_starts.window_from, window_first),
  -- recorded with its start
  rfrom timestamptz[] := '{}';
  rfirst bigint[] := '{}';
  last_seq bigint;
  last_at timestamptz;
  win_from timestamptz;
  win_first bigint;
  taken int;
  stop_key text;
  fast_ids bigint[];
  fast_rkeys text[];
  fast_rlast bigint[];
  fast_rlast_at timestamptz[];
  fast_rfrom timestamptz[];
  fast_rfirst bigint[];
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
         array_agg(f.last_seq ORDER BY f.n), array_agg(f.last_at ORDER BY f.n),
         array_agg(f.win_from ORDER BY f.n), array_agg(f.win_first ORDER BY f.n)
  INTO fast_ids, fast_rkeys, fast_keys, fast_distinct, stop_key, fast_rlast, fast_rlast_at,
       fast_rfrom, fast_rfirst
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
    SELECT w.n, w.k, h.id, coalesce(h.rate_key, '') AS rk, st.last_seq, st.last_at,
           wf.win_from, wf.win_first
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
         -- the head's rate key's last start (its number, time and window fact), with a
         -- rate only
         LEFT JOIN LATERAL (SELECT s.seq AS last_seq, s.started_at AS last_at,
                                   s.window_from AS known_from, s.window_first AS known_first
                            FROM job_starts s
                            WHERE rate_n IS NOT NULL AND s.queue = claim_queue
                              AND s.rate_key = coalesce(h.rate_key, '')
                            ORDER BY s.started_at DESC, s.seq DESC LIMIT 1) st ON true
         -- the window's first number: the last start's fact when it covers this window and
         -- leaves the key room (no probe; also a key with no start), else the window's first
         -- start probed (the key's next number if the window holds none)
         LEFT JOIN LATERAL (
           SELECT CASE WHEN b.known THEN coalesce(st.known_from, '-infinity')
                       ELSE at - rate_span END AS win_from,
                  CASE WHEN b.known THEN coalesce(st.known_first, 1)
                       ELSE coalesce((SELECT s.seq FROM job_starts s
                                      WHERE s.queue = claim_queue
                                        AND s.rate_key = coalesce(h.rate_key, '')
                                        AND s.started_at > at - rate_span
                                      ORDER BY s.started_at, s.seq LIMIT 1),
                                     st.last_seq + 1) END AS win_first
           FROM (SELECT st.last_seq IS NULL
                        OR (at - rate_span >= st.known_from
                            AND st.last_seq - st.known_first + 1 < rate_n) AS known) b
           WHERE rate_n IS NOT NULL) wf ON true
    WHERE h.run_at <= at
      AND (h.group_key IS NULL
           OR (SELECT count(*) FROM jobs r
               WHERE r.queue = claim_queue AND r.group_key = h.group_key
                 AND r.group_key IS NOT NULL AND r.status = 'running') < per_key)
      AND (rate_n IS NULL
           OR coalesce(st.last_seq - wf.win_first + 1, 0) < rate_n)
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
    rfrom := fast_rfrom;
    rfirst := fast_rfirst;
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
        -- Jobs with neither key, in claim order: the first hundred of their own index
        -- (0031), however many keyed jobs, held or not, come before them.
        FOR cand IN
          SELECT j.id FROM jobs j
          WHERE j.queue = claim_queue AND j.status = 'queued' AND j.run_at <= at
            AND j.group_key IS NULL AND j.rate_key IS NULL
          ORDER BY j.priority DESC, j.run_at LIMIT 100
        LOOP
          EXIT WHEN key_taken >= share OR cardinality(ids) >= claim_free;
          CONTINUE WHEN cand.id = ANY (ids);
          last_seq := NULL;
          last_at := NULL;
          win_from := NULL;
          win_first := NULL;
          IF rate_n IS NOT NULL THEN
            SELECT s.seq, s.started_at, s.window_from, s.window_first
              INTO last_seq, last_at, win_from, win_first FROM job_starts s
            WHERE s.queue = claim_queue AND s.rate_key = ''
            ORDER BY s.started_at DESC, s.seq DESC LIMIT 1;
            win_from := coalesce(win_from, '-infinity');
            win_first := coalesce(win_first, 1);
            taken := coalesce(cardinality(array_positions(rkeys, '')), 0);
            IF at - rate_span < win_from OR coalesce(last_seq - win_first + 1, 0) + taken >= rate_n
            THEN  -- the fact does not cover this window or leaves no room: probe
              win_from := at - rate_span;
              win_first := coalesce((SELECT s.seq FROM job_starts s
                                     WHERE s.queue = claim_queue AND s.rate_key = ''
                                       AND s.started_at > at - rate_span
                                     ORDER BY s.started_at, s.seq LIMIT 1), last_seq + 1, 1);
            END IF;
            used := coalesce(last_seq - win_first + 1, 0) + taken;
            EXIT WHEN used >= rate_n;
          END IF;
          PERFORM 1 FROM jobs j WHERE j.id = cand.id AND j.status = 'queued'
            FOR UPDATE SKIP LOCKED;
          CONTINUE WHEN NOT FOUND;
          ids := ids || cand.id;
          rkeys := rkeys || ''::text;
          rlast := rlast || last_seq;
          rlast_at := rlast_at || last_at;
          rfrom := rfrom || win_from;
          rfirst := rfirst || win_first;
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
          win_from := NULL;
          win_first := NULL;
          IF rate_n IS NOT NULL THEN
            SELECT s.seq, s.started_at, s.window_from, s.window_first
              INTO last_seq, last_at, win_from, win_first FROM job_starts s
            WHERE s.queue = claim_queue AND s.rate_key = rk
            ORDER BY s.started_at DESC, s.seq DESC LIMIT 1;
            win_from := coalesce(win_from, '-infinity');
            win_first := coalesce(win_first, 1);
            taken := coalesce(cardinality(array_positions(rkeys, rk)), 0);
            IF at - rate_span < win_from OR coalesce(last_seq - win_first + 1, 0) + taken >= rate_n
            THEN  -- the fact does not cover this window or leaves no room: probe
              win_from := at - rate_span;
              win_first := coalesce((SELECT s.seq FROM job_starts s
                                     WHERE s.queue = claim_queue AND s.rate_key = rk
                                       AND s.started_at > at - rate_span
                                     ORDER BY s.started_at, s.seq LIMIT 1), last_seq + 1, 1);
            END IF;
            used := coalesce(last_seq - win_first + 1, 0) + taken;
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
          rfrom := rfrom || win_from;
          rfirst := rfirst || win_first;
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
    -- earlier than it; two starts of one bucket in this claim take two numbers. Each
    -- carries the window fact its check used (migration 0023).
    WITH pruned AS (
      DELETE FROM job_starts s
      WHERE rate_n IS NOT NULL AND s.queue = claim_queue AND s.rate_key = ANY (rkeys)
        AND s.started_at <= at - 2 * rate_span
    ), started AS (
      INSERT INTO job_starts (queue, rate_key, started_at, seq, window_from, window_first)
      SELECT claim_queue, u.rk, greatest(at, u.last_at),
             coalesce(u.last_seq, 0) + row_number() OVER (PARTITION BY u.rk),
             u.win_from, u.win_first
      FROM unnest(rkeys, rlast, rlast_at, rfrom, rfirst)
        AS u (rk, last_seq, last_at, win_from, win_first)
      WHERE rate_n IS NOT NULL
    )
    INSERT INTO queue_claim_cursors AS c (queue, after_key) VALUES (claim_queue, last_taken)
    ON CONFLICT (queue) DO UPDATE SET after_key = excluded.after_key;
  END IF;
  RETURN ids;
END
$fair$;
