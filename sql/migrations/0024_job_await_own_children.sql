-- 0024_job_await_own_children: job_await (0017) links only children the calling transaction inserted: it runs with its owner's rights (SECURITY DEFINER, executable by pgkick_producer), and a producer calling it with another job's id as a child set that job 'waiting' or failed it, where the roles promise the producer updates nothing. Same signature, rules and answers for its callers (pgkick.store.dependencies, job_insert_flow's callers).
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
  SELECT j.id INTO foreign_child
  FROM jobs j,
       LATERAL (SELECT ((cur >> 32) << 32) | j.xmin::text::bigint AS near) AS x,
       LATERAL (SELECT CASE WHEN x.near - cur > 2147483648 THEN x.near - 4294967296
                            WHEN cur - x.near > 2147483648 THEN x.near + 4294967296
                            ELSE x.near END AS full_id) AS f
  WHERE j.id = ANY (child_ids)
    AND pg_xact_status(f.full_id::text::xid8) IS DISTINCT FROM 'in progress'
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
