-- 0017_job_dependencies: jobs that wait for others (issue 34): a job status 'waiting', the job_dependencies table (child, parent, policy), a flag on parents that have dependants, the server-side job_await that links children to existing parents, and the trigger that releases, fails or cancels dependants when a parent finishes, transitively. (A waiting job holds its unique key: the live-key index and job_insert_flow name 'waiting' since 0015.)
-- Why in the database: the dependant must become ready in the transaction that finishes its
-- last parent, whoever finishes it (a worker's complete or fail, the reaper, an operator's
-- cancel), with no poller. Why a flag column (has_dependants) and a WHEN clause: the trigger
-- is queued only for a row that has dependants; every other completion pays one boolean test.
-- Why a counter (waiting_on) on the child: the last parent to finish is the one whose
-- decrement reaches 0; two parents finishing at once both update the child's row, and its
-- row lock orders them, so exactly one of them releases it.
-- Released queues are appended to the transaction-local setting pgkick.released_queues
-- (newline-separated; queue names are printable): the worker's complete statements read it
-- in the same statement (sql/job_complete_many.sql) and kick those queues, with no extra
-- statement for jobs without dependants.
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
  CHECK (status IN ('waiting', 'queued', 'running', 'done', 'failed'));
ALTER TABLE jobs
  ADD COLUMN has_dependants boolean NOT NULL DEFAULT false,
  ADD COLUMN waiting_on int NOT NULL DEFAULT 0,
  ADD CONSTRAINT jobs_waiting_iff_counted CHECK ((status = 'waiting') = (waiting_on > 0));

CREATE TABLE job_dependencies (
  child_id  bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  parent_id bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  policy    text   NOT NULL CHECK (policy IN ('fail', 'cancel', 'run anyway')),
  PRIMARY KEY (parent_id, child_id),
  CONSTRAINT job_dependencies_not_self CHECK (child_id <> parent_id)
);
CREATE INDEX job_dependencies_child_idx ON job_dependencies (child_id);

-- Links children (just inserted in the caller's transaction, still queued) to their parents:
-- pairs (child, parent, policy). Parents must exist (so no cycle can be made) and
-- are locked by the flag's update, so none finishes unseen between the look and the commit.
-- A parent already done (or failed under 'run anyway') counts as finished; one failed under
-- 'fail' or 'cancel' ends the child at once. Returns the children left waiting. SECURITY DEFINER: a producer may neither
-- read a job's status nor update it.
CREATE FUNCTION job_await(child_ids bigint[], parent_ids bigint[], policies text[],
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
BEGIN
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

-- A parent left its state: release, fail or cancel the dependants still waiting. Fired only
-- for rows with dependants (the trigger's WHEN). A child failed or cancelled here is itself
-- updated, which fires this trigger again for its own dependants: the propagation is
-- transitive.
CREATE FUNCTION job_dependants_settle() RETURNS trigger
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
        status = CASE WHEN c.waiting_on = 1 THEN 'queued' ELSE 'waiting' END
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

CREATE TRIGGER jobs_dependants_settle AFTER UPDATE OF status ON jobs
FOR EACH ROW WHEN (NEW.has_dependants AND OLD.status IS DISTINCT FROM NEW.status
                   AND NEW.status IN ('done', 'failed'))
EXECUTE FUNCTION job_dependants_settle();
