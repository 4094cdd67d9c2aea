-- 0030_job_insert_flow_timed_by_the_clock: a debounced or throttled enqueue is timed by the clock once it holds its key's lock, not by its transaction's start: the job's created_at (which a throttle compares) and a debounce's due time count from the enqueue itself. job_insert_flow: 0026's, same signature, answers and grants.
-- Why (a review of the flow control, 2026-12-05): `at` was now(), the start of the caller's
-- transaction. An app that enqueues inside its own transaction (pgkick.transaction,
-- enqueue_in, the Django and SQLAlchemy forms) some time after it began recorded the job as
-- made that long before: a throttle of 5 s admitted a second job 0.23 s after the first
-- committed (its transaction had begun 6 s earlier), and a debounced job could fall due at
-- its commit, before the burst had been quiet for the debounce. The clock is read after the
-- key's lock, so an enqueue that waited for another's commit counts from after it. What is
-- left: a job is visible only at its transaction's commit, so an app that holds its
-- transaction open after the enqueue delays the job's visibility, not its time. Jobs made
-- here take no parents (the client refuses after= with either), so job_await's rule that a
-- child was made at its transaction's start (0026) never meets one.
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
  PERFORM pg_advisory_xact_lock(hashtextextended('pgkick.flow:' || f_key, 0));
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
