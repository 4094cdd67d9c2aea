-- 0011_job_group_order: a grouped job's place in its group fixed at enqueue (ordered_at, the run_at it was enqueued with), and job_claim's head rule on it: the group's first queued job in (priority DESC, ordered_at, id) is its head, whatever its attempts, so a retried or snoozed job keeps its place and holds its group, and one claim takes at most one job of a group (issue 31).
-- Why (pgkick.store.groups has the rules): the head used to be the first queued job in claim
-- order (priority, run_at, id), or any queued job with attempts > 0. A retry moves run_at and
-- keeps attempts > 0: `pgkick retry` of three failed jobs of a group made all three heads, and
-- one batch claimed them together; a job snoozed on its first attempt (attempts back to 0,
-- run_at later) fell behind the next job of its group, while on a later attempt it held the
-- group. An order that nothing after the insert moves makes both cases one rule.
-- ordered_at is set by a trigger on insert (grouped jobs only), so every insert (the
-- producer's statements, the periodic tick's, an operator's) gets it without naming it.
ALTER TABLE jobs ADD COLUMN ordered_at timestamptz;

-- Jobs already waiting for a retry headed their group under the old rule: they keep it.
UPDATE jobs
SET ordered_at = CASE WHEN status = 'queued' AND attempts > 0 THEN '-infinity' ELSE run_at END
WHERE group_key IS NOT NULL;

CREATE FUNCTION job_ordered_at_set() RETURNS trigger
LANGUAGE plpgsql
AS $set$
BEGIN
  NEW.ordered_at := NEW.run_at;
  RETURN NEW;
END
$set$;

CREATE TRIGGER jobs_ordered_at BEFORE INSERT ON jobs
FOR EACH ROW WHEN (NEW.group_key IS NOT NULL) EXECUTE FUNCTION job_ordered_at_set();

DROP INDEX jobs_group_queued_idx;
CREATE INDEX jobs_group_queued_idx ON jobs (queue, group_key, (-priority), ordered_at, id)
  WHERE group_key IS NOT NULL AND status = 'queued';
DROP INDEX jobs_group_retrying_idx;

-- The claim of 0007 with the new head rule (its unlocked branch is unchanged).
CREATE OR REPLACE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                                     claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $claim$
#variable_conflict use_column
DECLARE
  at timestamptz := coalesce(claim_now, now());
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
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts FROM claimed c
    ORDER BY c.priority DESC, c.run_at, c.id;
    RETURN;
  END IF;

  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('pgkick.claim'), hashtext(claim_queue));
  RETURN QUERY
  WITH next AS (
    -- A grouped job is claimed only as its group's head (no queued job of the group before
    -- it in the group's fixed order) and while none of its group runs: the head is unique,
    -- so one claim takes at most one job of a group.
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
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;
