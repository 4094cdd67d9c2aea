-- 0019_job_dependants_revive: retrying a failed job revives the dependants its failure ended (issue 34): a trigger on failed -> queued (the operator's retry) and failed -> waiting (a revived dependant, so the revival is transitive, as the propagation of 0017 is) puts those dependants back to 'waiting', counting their parents again, in the retry's transaction.
-- Why a trigger, not a function the retry statement calls: the failure went down the DAG by
-- a trigger (0017's job_dependants_settle), whoever failed the parent; its undoing goes down
-- the same way, whoever puts the parent back (`pgkick retry` by id or by filter, the
-- dashboard's button, MaintenanceStore.retry_failed, a hand-written UPDATE), and a
-- revived dependant's own revival fires it again for the next generation.
-- Which dependants: failed ones whose last_error says a parent's failure ended them (the
-- text 0017's trigger and job_await write: 'parent job N failed: ...' under policy fail,
-- 'cancelled: parent job N failed: ...' under cancel), linked to this job. Not revived:
-- jobs cancelled by an operator, jobs that failed on their own, and dependants under 'run
-- anyway' (they were released, not failed). (A spawning run that failed wrote no children:
-- they are inserted with its completion, pgkick.worker.spawn; its retry spawns them.)
-- A dependant with another parent still failed under fail or cancel (one not retried with
-- this one) stays failed, as do its own dependants: revived, it would fail again at once.
-- Retrying that other parent later revives it (its last_error may name either parent).
-- So does a dependant whose unique_key a live job took since it failed.
-- Why locks: a revived dependant counts its parents still to finish (waiting_on). Another
-- parent finishing concurrently decrements only a waiting dependant, so it must not finish
-- between this count and this commit: every parent of the dependants is locked FOR SHARE
-- (id order) before they are counted; a completion under way commits first (and is
-- counted as finished) or waits for this transaction (and then finds the dependant
-- waiting). Parents are locked before their dependants, as a completion locks them.
-- The number revived is added to the transaction-local setting pgkick.revived_dependants,
-- read by sql/job_revived_count.sql in the retry's transaction (the CLI's report).
CREATE FUNCTION job_dependants_revive() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path FROM CURRENT
AS $revive$
DECLARE
  candidates bigint[];
  revived int;
BEGIN
  SELECT array_agg(d.child_id ORDER BY d.child_id) INTO candidates
  FROM job_dependencies d JOIN jobs c ON c.id = d.child_id
  WHERE d.parent_id = NEW.id AND d.policy <> 'run anyway'
    AND c.status = 'failed' AND c.last_error ~ '^(cancelled: )?parent job [0-9]+ failed: ';
  IF candidates IS NULL THEN
    RETURN NULL;
  END IF;
  PERFORM 1 FROM jobs p
  WHERE p.id IN (SELECT d.parent_id FROM job_dependencies d WHERE d.child_id = ANY (candidates))
  ORDER BY p.id FOR SHARE;
  PERFORM 1 FROM jobs c WHERE c.id = ANY (candidates) ORDER BY c.id FOR UPDATE;
  -- Counted after the locks (a statement of its own, so it sees what committed meanwhile).
  -- A parent blocks the revival if it is failed under fail or cancel.
  WITH parents AS (
    SELECT d.child_id,
           count(*) FILTER (WHERE p.status NOT IN ('done', 'failed'))::int AS pending,
           bool_or(d.policy <> 'run anyway' AND p.status = 'failed') AS blocked
    FROM job_dependencies d JOIN jobs p ON p.id = d.parent_id
    WHERE d.child_id = ANY (candidates)
    GROUP BY d.child_id
  ), revive AS (
    -- As a retry: finished_at cleared, last_error kept (why it had failed), no cancel mark.
    UPDATE jobs c
    SET status = 'waiting', waiting_on = parents.pending, finished_at = NULL,
        cancel_requested_at = NULL
    FROM parents
    WHERE c.id = parents.child_id AND c.status = 'failed'
      AND NOT parents.blocked AND parents.pending > 0
      -- A live job took its unique key meanwhile: it stays failed (waiting, it would hold
      -- the key beside that job, which jobs_unique_live_idx refuses).
      AND NOT EXISTS (SELECT 1 FROM jobs o
                      WHERE c.unique_key IS NOT NULL AND o.unique_key = c.unique_key
                        AND o.status IN ('waiting', 'queued', 'running'))
    RETURNING c.id
  )
  SELECT count(*) INTO revived FROM revive;
  IF revived > 0 THEN
    PERFORM set_config('pgkick.revived_dependants',
                       (coalesce(nullif(current_setting('pgkick.revived_dependants', true), ''),
                                 '0')::int + revived)::text, true);
  END IF;
  RETURN NULL;
END
$revive$;

CREATE TRIGGER jobs_dependants_revive AFTER UPDATE OF status ON jobs
FOR EACH ROW WHEN (NEW.has_dependants AND OLD.status = 'failed'
                   AND NEW.status IN ('queued', 'waiting'))
EXECUTE FUNCTION job_dependants_revive();
