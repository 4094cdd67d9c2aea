-- 0026_job_functions_own_rows: the two functions a producer may call with their owner's rights (SECURITY DEFINER) touch only rows that are the caller's to touch: job_await takes as a child only a job made at its transaction's start and not yet flagged as a parent, and job_insert_flow takes the caller's clock only from its owner's sessions, refuses a NULL payload, queue or task and a period outside (0, 30 days] before any write, and debounces only a job of its own queue and task. Same signatures, grants and answers for pgkick's own calls.
-- Why (a review of the roles, 2026-12-05): 0024 took a child as the transaction's own when
-- its row's last writer (xmin) was the transaction; but job_await's own flag on a parent
-- writes that parent's row, so a producer that named another app's job as a parent in one
-- call could name it as a child in the next, and hold it 'waiting' for ever or fail it. A
-- debounce matched the key alone and replaced the payload and due time of another task's
-- (another app's) job holding it; and a NULL payload failed that update with the server's
-- "failing row contains (...)" detail, which showed the caller the row's status, attempts
-- and last error. The checks the client makes (pgkick.validation.flow) are made here too:
-- the function is callable by any role granted EXECUTE, not only through pgkick's client.
-- A debounce's update made a job "this transaction's" as the flag did (a review of this
-- migration found it): hence created_at too. And the caller's clock, there for tests, set
-- a held job's due time years ahead when a producer named such a clock.
CREATE OR REPLACE FUNCTION job_await(child_ids bigint[], parent_ids bigint[], policies text[],
                          await_now timestamptz)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT
AS $await$
#variable_conflict use_column
DECLARE
  missing bigint;
  bad_policy text;
  at timestamptz := coalesce(await_now, now());
  p_ids bigint[];
  p_status text[];
  p_errors text[];
  foreign_child bigint;
  cur bigint := pg_current_xact_id()::text::bigint;
BEGIN
  -- Only jobs this transaction inserted may be made to wait: the function runs with its
  -- owner's rights, and a producer could otherwise fail or hold any queued job. A child row
  -- visible here whose inserting transaction is still in progress is this transaction's own
  -- (or one of its savepoints'): another's uncommitted insert is invisible. xmin is 32 bits;
  -- its full id is the one nearest this transaction's (the caller has just inserted it).
  -- xmin is the last writer, not the inserter: this function's flag on a parent, or a
  -- debounce's update of a key's job, makes that row this transaction's too (0026). So a
  -- child must also have been made at this transaction's start (created_at, its default,
  -- now(): no insert pgkick sends sets it, and debounced jobs take no parents; an update
  -- leaves it) and not be flagged as a parent already (pgkick links a job in the call that
  -- follows its insert, before any later job can name it: a batch's pairs go in one call,
  -- checked before flagging).
  SELECT j.id INTO foreign_child
  FROM jobs j,
       LATERAL (SELECT ((cur >> 32) << 32) | j.xmin::text::bigint AS near) AS x,
       LATERAL (SELECT CASE WHEN x.near - cur > 2147483648 THEN x.near - 4294967296
                            WHEN cur - x.near > 2147483648 THEN x.near + 4294967296
                            ELSE x.near END AS full_id) AS f
  WHERE j.id = ANY (child_ids)
    AND (pg_xact_status(f.full_id::text::xid8) IS DISTINCT FROM 'in progress'
         OR j.created_at <> now() OR j.has_dependants)
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'pgkick: job % was not enqueued in this transaction', foreign_child
      USING HINT = 'a job is linked to its parents (after=) in the transaction that enqueues it',
            ERRCODE = '42501';
  END IF;
  SELECT p INTO bad_policy FROM unnest(policies) AS p
  WHERE p IS NULL OR p NOT IN ('fail', 'cancel', 'run anyway') LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'pgkick: unknown dependency policy %', coalesce(bad_policy, 'NULL')
      USING HINT = 'use fail, cancel or run anyway', ERRCODE = '22023';
  END IF;
  -- Locked in id order (as a batch's complete mostly goes), then flagged.
  WITH locked AS (
    SELECT l.id FROM jobs l WHERE l.id = ANY (parent_ids) ORDER BY l.id FOR UPDATE
  ), flagged AS (
    UPDATE jobs j SET has_dependants = true
    FROM locked WHERE j.id = locked.id
    RETURNING j.id, j.status, j.last_error
  )
  SELECT array_agg(f.id), array_agg(f.status), array_agg(f.last_error)
  INTO p_ids, p_status, p_errors
  FROM flagged f;
  SELECT p INTO missing FROM unnest(parent_ids) AS p
  WHERE p_ids IS NULL OR p <> ALL (p_ids) LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'pgkick: parent job % does not exist in schema %', missing, current_schema()
      USING HINT = 'a job can wait only for jobs enqueued before it', ERRCODE = '23503';
  END IF;
  INSERT INTO job_dependencies (child_id, parent_id, policy)
  SELECT c, p, pol FROM unnest(child_ids, parent_ids, policies) AS x(c, p, pol)
  ON CONFLICT (parent_id, child_id) DO NOTHING;
  -- A parent already failed under 'fail' or 'cancel': the child ends now, with the reason.
  UPDATE jobs j
  SET status = 'failed', finished_at = at,
      last_error = left(CASE WHEN x.pol = 'cancel' THEN 'cancelled: ' ELSE '' END
                        || format('parent job %s failed: %s', f.id, f.last_error), 2000)
  FROM unnest(child_ids, parent_ids, policies) AS x(c, p, pol)
  JOIN unnest(p_ids, p_status, p_errors) AS f(id, status, last_error) ON f.id = x.p
  WHERE j.id = x.c AND j.status = 'queued' AND f.status = 'failed' AND x.pol <> 'run anyway';
  RETURN QUERY
  WITH pending AS (
    SELECT x.c, count(*)::int AS n
    FROM unnest(child_ids, parent_ids) AS x(c, p)
    JOIN unnest(p_ids, p_status) AS f(id, status) ON f.id = x.p
    WHERE f.status NOT IN ('done', 'failed')
    GROUP BY x.c
  )
  UPDATE jobs j SET status = 'waiting', waiting_on = pending.n
  FROM pending WHERE j.id = pending.c AND j.status = 'queued'
  RETURNING j.id;
END
$await$;

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
  -- anyone else, a clock years ahead set a held job's due time as far (0026).
  at timestamptz := CASE WHEN f_now IS NOT NULL
                              AND pg_has_role(session_user, current_user, 'MEMBER')
                         THEN f_now ELSE now() END;
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
