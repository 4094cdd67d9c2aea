-- 0033_job_dependants_revive_not_behind_a_newer_key: a dependant is not revived when a newer job took its unique key since it failed, finished or not (as a retry of it is refused: job_retry_unique_conflicts). job_dependants_revive: 0032's, that one condition wider.
-- Why (a review of unique keys, 2026-12-05): a duplicate enqueue is answered with the newest
-- job with its key (job_get_latest_by_unique_keys; the producer may not read status). A
-- revived dependant older than a finished job with its key held the key while a duplicate
-- was answered with the finished job, and nothing was enqueued. 0019 left it failed only
-- when a live job held the key; now also when any newer job has it.
CREATE OR REPLACE FUNCTION job_dependants_revive() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path FROM CURRENT
AS $revive$
DECLARE
  candidates bigint[];
  revived int;
  anyway bigint[];
BEGIN
  -- Its 'run anyway' dependants still waiting counted its failure as its finish (0017's
  -- settle, or job_await linking them after it): back in the queue, it is unfinished again,
  -- so each counts it again (0032), its other parents locked first as below. A dependant
  -- already released ran or runs after a finished parent, as it should: left alone.
  SELECT array_agg(d.child_id ORDER BY d.child_id) INTO anyway
  FROM job_dependencies d JOIN jobs c ON c.id = d.child_id
  WHERE d.parent_id = NEW.id AND d.policy = 'run anyway' AND c.status = 'waiting';
  IF anyway IS NOT NULL THEN
    PERFORM 1 FROM jobs p
    WHERE p.id IN (SELECT d.parent_id FROM job_dependencies d WHERE d.child_id = ANY (anyway))
    ORDER BY p.id FOR SHARE;
    UPDATE jobs c SET waiting_on = c.waiting_on + 1
    FROM job_dependencies d
    WHERE d.parent_id = NEW.id AND d.policy = 'run anyway' AND c.id = d.child_id
      AND c.status = 'waiting';
  END IF;
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
      -- the key beside that job, which jobs_unique_live_idx refuses). So does one whose key
      -- a newer job took, finished or not (0033: a duplicate is answered with the newest).
      AND NOT EXISTS (SELECT 1 FROM jobs o
                      WHERE c.unique_key IS NOT NULL AND o.unique_key = c.unique_key
                        AND (o.status IN ('waiting', 'queued', 'running') OR o.id > c.id))
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
