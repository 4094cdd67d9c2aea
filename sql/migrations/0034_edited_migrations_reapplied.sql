-- 0034_edited_migrations_reapplied: an install migrated before 0015, 0017, 0022 or 0026 were edited in place gets what they make now: job_await as 0026 writes it (the first design's five-argument job_await dropped), job_dependants_settle and its trigger as 0017 writes them (job_dependencies without the attempt column), job_ready_fair_count as 0022 writes it, and the live-key unique index over waiting jobs as 0015 makes it. An install that has them already is left as it is.
-- Why (a review of migrations and upgrades, 2026-12-05): the ledger records versions, not
-- texts, so a database that applied a migration never runs it again, whatever its file says
-- later. Those four were edited on main after databases could have applied them, and an
-- install upgraded from such a state reported the latest version and kept: a job_await
-- without 0026's created_at check (a producer could make another app's debounced job its
-- child and hold it), a five-argument job_await with none of 0024's and 0026's checks, still
-- SECURITY DEFINER and granted to pgkick_producer, the first design's trigger (fired when a
-- running parent went back to the queue) and attempt column, job_ready_fair_count counting
-- a rate's window row by row, and a unique index that let a waiting job take a key a queued
-- or running one held. tests/test_schema_upgrade.py now refuses an edit of a released
-- migration (tests/migration_hashes.txt) and checks that such an install, upgraded, is a
-- fresh one; a change is a new migration, like this one.
-- The functions are copies of the newest definition before this migration (a test compares
-- them on a fresh install): CREATE OR REPLACE keeps their owner and grants, and rewrites a
-- current one to the same text. The trigger is made again (catalog only). The index is
-- rebuilt only where it does not count waiting jobs, the one shape it ever had otherwise:
-- a rebuild reads the whole table. Before that, a key two live jobs hold (a waiting job
-- that took a key the old index did not guard) stops the migration, in words, with nothing
-- changed: which of the two should keep it is the operator's choice.

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

-- 0028's right: only its owner and the roles granted it (role_setup) may call it.
REVOKE ALL ON FUNCTION job_await(bigint[], bigint[], text[], timestamptz) FROM PUBLIC;
DROP FUNCTION IF EXISTS job_await(bigint[], bigint[], text[], int[], timestamptz);

CREATE OR REPLACE FUNCTION job_dependants_settle() RETURNS trigger
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

DROP TRIGGER jobs_dependants_settle ON jobs;
CREATE TRIGGER jobs_dependants_settle AFTER UPDATE OF status ON jobs
FOR EACH ROW WHEN (NEW.has_dependants AND OLD.status IS DISTINCT FROM NEW.status
                   AND NEW.status IN ('done', 'failed'))
EXECUTE FUNCTION job_dependants_settle();
ALTER TABLE job_dependencies DROP COLUMN IF EXISTS attempt;

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

DO $live_keys$
DECLARE
  taken record;
BEGIN
  IF pg_get_indexdef('jobs_unique_live_idx'::regclass) LIKE '%''waiting''%' THEN
    RETURN;
  END IF;
  SELECT k.unique_key, k.ids, count(*) OVER () AS keys INTO taken
  FROM (SELECT j.unique_key, string_agg(j.id::text, ', ' ORDER BY j.id) AS ids
        FROM jobs j
        WHERE j.unique_key IS NOT NULL AND j.status IN ('waiting', 'queued', 'running')
        GROUP BY j.unique_key HAVING count(*) > 1) AS k
  ORDER BY k.unique_key LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'pgkick: unique key % is held by jobs % (and % other keys by more than one live job): the unique index of this install did not count waiting jobs, so a waiting job took a key another live job held. Nothing was changed: with the pgkick you run now, cancel all but one job of each such key (pgkick cancel ID ...), then run pgkick migrate again',
      quote_literal(taken.unique_key), taken.ids, taken.keys - 1
      USING ERRCODE = '23505';
  END IF;
  DROP INDEX jobs_unique_live_idx;
  CREATE UNIQUE INDEX jobs_unique_live_idx ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('waiting', 'queued', 'running');
END
$live_keys$;
