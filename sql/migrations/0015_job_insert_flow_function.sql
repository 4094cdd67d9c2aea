-- 0015_job_insert_flow_function: debounce and throttle on enqueue (issue 33), as one server-side function job_insert_flow(...) that producers may call without reading or updating jobs themselves; with the live-key unique index, it counts a waiting job (0017) as a live holder of its key.
-- Why a function, SECURITY DEFINER: a debounced enqueue replaces the payload and pushes
-- back the due time of the queued job holding its key, and a throttled one looks at the
-- key's newest job whatever its status; pgkick_producer may neither read status nor
-- update a job (tests/test_security.py), and should not gain either. The function can
-- only do this one thing, for one key, so the producer gets EXECUTE on it (role_setup)
-- and nothing more. Its search_path is this migration's (pgkick's schema).
--
-- Why a per-key advisory transaction lock, taken by the first statement: each later
-- statement (VOLATILE, READ COMMITTED) takes a fresh snapshot, so it sees every enqueue
-- of the key committed by an earlier holder of the lock, and a holder that has not
-- committed yet makes us wait. A throttle must see the key's jobs that already finished
-- (the partial unique index only covers live ones), and a debounce must never lose a
-- payload to two producers updating at once: under the lock, both are one at a time.
-- A plain unique enqueue of the same key (no lock) is still kept out by the index: the
-- insert below skips, and the loop reads the holder again.
-- A waiting job (status 'waiting', migration 0017: a job whose parents have not all
-- finished) holds its unique key as a queued or running one does, and a debounce updates
-- a waiting holder as a queued one (neither has started): this function and the live-key
-- index (0004, recreated here) name 'waiting' ahead of 0017, so the function is written
-- once. A status value in a predicate needs no status to exist yet; migrations run
-- together, and 0017 adds it before any job can be waiting.
DROP INDEX jobs_unique_live_idx;
CREATE UNIQUE INDEX jobs_unique_live_idx ON jobs (unique_key)
  WHERE unique_key IS NOT NULL AND status IN ('waiting', 'queued', 'running');

CREATE FUNCTION job_insert_flow(f_queue text, f_task text, f_payload jsonb, f_run_at timestamptz,
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
  at timestamptz := coalesce(f_now, now());
  due timestamptz;
  held record;
BEGIN
  IF f_key IS NULL OR (f_debounce IS NULL) = (f_throttle IS NULL) THEN
    RAISE EXCEPTION 'job_insert_flow: a unique key and exactly one of debounce and throttle'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('pgkick.flow:' || f_key, 0));
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
    SELECT j.id, j.queue, j.run_at, j.status, j.created_at INTO held FROM jobs j
    WHERE j.unique_key = f_key AND j.status IN ('waiting', 'queued', 'running');
    IF FOUND THEN
      IF f_debounce IS NULL OR held.status = 'running' THEN
        -- Throttle: an older live job holds the key (kept). Debounce: it runs already
        -- (the payload it started with is the one it runs; docs/guide/debounce.md).
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

REVOKE ALL ON FUNCTION job_insert_flow(text, text, jsonb, timestamptz, interval, int, int, text,
                                       text, text, text, interval, interval, interval,
                                       timestamptz) FROM PUBLIC;
