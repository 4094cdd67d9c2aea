"""Every migration script: generated from sql/migrations/ by tools/bundle_sql.py.

Do not edit: change sql/ and regenerate. Apart from pgkick.store.queries because only
a migrator (`pgkick migrate`, pgkick.migrate) reads them: the Lambda artifact leaves
them out, and a handler checks versions only (queries.MIGRATION_VERSIONS).
"""

from typing import Final, LiteralString

# (version, name, script) in the order they apply.
MIGRATIONS: Final[tuple[tuple[int, str, LiteralString], ...]] = (
    (1, 'jobs', """\
-- 0001_jobs: the article's jobs table (plus task and finished_at), its state-machine constraints and the partial ready index.
CREATE TABLE jobs (
  id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue        text        NOT NULL DEFAULT 'default',
  task         text        NOT NULL,
  payload      jsonb       NOT NULL,
  status       text        NOT NULL DEFAULT 'queued'
               CHECK (status IN ('queued', 'running', 'done', 'failed')),
  run_at       timestamptz NOT NULL DEFAULT now(),
  attempts     int         NOT NULL DEFAULT 0,
  max_attempts int         NOT NULL DEFAULT 5,
  locked_until timestamptz,
  last_error   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  finished_at  timestamptz,
  CONSTRAINT jobs_max_attempts_positive CHECK (max_attempts >= 1),
  CONSTRAINT jobs_attempts_within_max CHECK (attempts BETWEEN 0 AND max_attempts),
  CONSTRAINT jobs_lease_iff_running CHECK ((status = 'running') = (locked_until IS NOT NULL)),
  CONSTRAINT jobs_finished_iff_final CHECK ((status IN ('done', 'failed')) = (finished_at IS NOT NULL)),
  CONSTRAINT jobs_queue_named CHECK (queue <> ''),
  CONSTRAINT jobs_task_named CHECK (task <> '')
);

-- Only the rows workers look for: stays small however long the finished history grows.
CREATE INDEX jobs_ready_idx ON jobs (queue, run_at) WHERE status = 'queued';"""),
    (2, 'claimed_at', """\
-- 0002_claimed_at: when the current attempt was claimed, for kick-to-start latency and "running since".
ALTER TABLE jobs ADD COLUMN claimed_at timestamptz;"""),
    (3, 'queue_watchers', """\
-- 0003_queue_watchers: who will look at a queue soon (a draining worker, or a kick on its way), so producers kick only when nobody will.
CREATE TABLE queue_watchers (
  queue    text        NOT NULL,
  watcher  text        NOT NULL,  -- a worker's id, or 'kick' for a kick sent and not yet taken up
  until    timestamptz NOT NULL,  -- past this instant the watcher no longer counts
  PRIMARY KEY (queue, watcher)
);"""),
    (4, 'job_unique_priority_group', """\
-- 0004_job_unique_priority_group: unique keys, priorities, ordered groups and per-queue running limits (issue 16).
ALTER TABLE jobs
  ADD COLUMN priority   smallint NOT NULL DEFAULT 0,
  ADD COLUMN unique_key text,
  ADD COLUMN group_key  text,
  ADD CONSTRAINT jobs_priority_range CHECK (priority BETWEEN -100 AND 100),
  ADD CONSTRAINT jobs_unique_key_named CHECK (unique_key <> ''),
  ADD CONSTRAINT jobs_group_named CHECK (group_key <> '');

-- Highest priority first, then run_at: the claim reads the queue in this order.
DROP INDEX jobs_ready_idx;
CREATE INDEX jobs_ready_idx ON jobs (queue, priority DESC, run_at) WHERE status = 'queued';

-- At most one live (queued or running) job per unique key: the insert's ON CONFLICT target.
CREATE UNIQUE INDEX jobs_unique_live_idx ON jobs (unique_key)
  WHERE unique_key IS NOT NULL AND status IN ('queued', 'running');
-- A skipped duplicate's answer: the newest job with its key (needs no status, which a
-- producer may not read).
CREATE INDEX jobs_unique_key_idx ON jobs (unique_key, id) WHERE unique_key IS NOT NULL;

-- A group's head (its first queued job in claim order: priority, run_at, id), whether one
-- of its jobs runs, and whether one waits for a retry (it holds the group): each a probe
-- of a small partial index. (-priority): one ascending row comparison finds the head.
CREATE INDEX jobs_group_queued_idx ON jobs (queue, group_key, (-priority), run_at, id)
  WHERE group_key IS NOT NULL AND status = 'queued';
CREATE INDEX jobs_group_running_idx ON jobs (queue, group_key)
  WHERE group_key IS NOT NULL AND status = 'running';
CREATE INDEX jobs_group_retrying_idx ON jobs (queue, group_key)
  WHERE group_key IS NOT NULL AND status = 'queued' AND attempts > 0;

-- Running jobs of a queue, counted against its limit.
CREATE INDEX jobs_running_idx ON jobs (queue) WHERE status = 'running';

-- The most jobs of a queue running at once; no row: no limit.
CREATE TABLE queue_limits (
  queue       text PRIMARY KEY CHECK (queue <> ''),
  max_running int  NOT NULL CHECK (max_running >= 1)
);"""),
    (5, 'job_result_cancel', """\
-- 0005_job_result_cancel: a task's result stored with its job, an operator's request to cancel a running job, and the periodic ticks already enqueued.
ALTER TABLE jobs ADD COLUMN result jsonb;
-- Set by `pgkick cancel` on a running job; the worker's heartbeat reads it back.
ALTER TABLE jobs ADD COLUMN cancel_requested_at timestamptz;

-- One row per periodic task per scheduled instant: the scheduler delivers at least once,
-- the job is inserted at most once (the tick's INSERT ... ON CONFLICT DO NOTHING and the
-- job's INSERT are one statement: periodic_tick_enqueue).
CREATE TABLE periodic_ticks (
  name     text        NOT NULL,
  tick_at  timestamptz NOT NULL,
  PRIMARY KEY (name, tick_at)
);"""),
    (6, 'own_schema', """\
-- 0006_own_schema: moves the tables of an install from before this version (with their rows, indexes, constraints, identity sequence and grants) from the role's default schema into pgkick's own, where 0001-0003 now create them; lets the pgkick roles that exist use that schema.
-- pgkick.schema.migrate runs this first of all on such an install, with search_path set to
-- pgkick's schema then the old one: a table found outside current_schema() is an old one.
-- On a fresh install everything is already in current_schema(): nothing moves (and no
-- table is locked for a no-op SET SCHEMA).
DO $move$
DECLARE
  table_name text;
  role_name text;
  found regclass;
BEGIN
  FOREACH table_name IN ARRAY ARRAY['pgkick_migrations', 'jobs', 'queue_watchers'] LOOP
    found := to_regclass(quote_ident(table_name));
    IF found IS NOT NULL AND (
      SELECT n.nspname FROM pg_catalog.pg_class AS c
      JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
      WHERE c.oid = found
    ) <> current_schema() THEN
      EXECUTE format('ALTER TABLE %s SET SCHEMA %I', found, current_schema());
    END IF;
  END LOOP;
  -- Roles set up before this version keep working without `pgkick migrate --roles` again.
  FOREACH role_name IN ARRAY ARRAY['pgkick_producer', 'pgkick_worker'] LOOP
    IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = role_name) THEN
      EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), role_name);
    END IF;
  END LOOP;
END
$move$;"""),
    (7, 'job_claim_function', """\
-- 0007_job_claim_function: the claim as one server-side function, job_claim(queue, batch, lease, now): one statement for every queue, groups and limits included, whose plans the server keeps per session (issue 16's claim cost).
-- Why a function (pgkick.groups has the rules): the claim used to be the plain statement,
-- or, for a queue with a running limit or live grouped jobs, four (BEGIN, the lock, the
-- claim, COMMIT), each planned by the server at every call: pgkick never prepares a
-- statement, so that transaction-mode poolers work. PL/pgSQL keeps the plans of the
-- statements inside a function in the session's cache, which a pooler cannot break (no
-- statement names cross the wire), and a VOLATILE function takes a fresh snapshot for
-- each statement under READ COMMITTED: the claim that follows the lock sees every claim
-- committed before the lock was granted, as the serialised claim's own statement did.
-- The search_path is the one this migration ran with (pgkick's schema), whatever the
-- caller's.
CREATE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
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
  -- min() rather than EXISTS: its plan is one probe of the groups' partial index even
  -- where the statistics expect many grouped rows (another queue's), when EXISTS may be
  -- planned as a scan of the table that stops at the first match: none in this queue.
  IF NOT EXISTS (SELECT 1 FROM queue_limits l WHERE l.queue = claim_queue)
     AND (SELECT min(g.group_key) FROM jobs g
          WHERE g.queue = claim_queue AND g.group_key IS NOT NULL AND g.status = 'queued')
         IS NULL
     AND (SELECT min(g.group_key) FROM jobs g
          WHERE g.queue = claim_queue AND g.group_key IS NOT NULL AND g.status = 'running')
         IS NULL
  THEN
    -- No limit, no live group: the plain claim, no lock. A grouped job committed since
    -- the check above is left to the next claim, which will see it and lock.
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
    ORDER BY c.priority DESC, c.run_at, c.id;  -- claim order (the update's is the index's)
    RETURN;
  END IF;

  -- Held until the caller's transaction ends; the statement below starts after it is
  -- granted, so its snapshot has every claim of this queue committed before: true under
  -- READ COMMITTED only (a REPEATABLE READ transaction keeps its first snapshot, and a
  -- limit would be passed silently), so anything else is refused.
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('pgkick.claim'), hashtext(claim_queue));
  RETURN QUERY
  WITH next AS (
    SELECT j.id, j.priority, j.run_at FROM jobs j
    WHERE j.queue = claim_queue AND j.status = 'queued' AND j.run_at <= at
      AND (j.group_key IS NULL
           OR (NOT EXISTS (SELECT 1 FROM jobs g
                           WHERE g.queue = j.queue AND g.group_key = j.group_key
                             AND g.group_key IS NOT NULL AND g.status = 'running')
               AND (j.attempts > 0
                    OR (NOT EXISTS (SELECT 1 FROM jobs g
                                    WHERE g.queue = j.queue AND g.group_key = j.group_key
                                      AND g.group_key IS NOT NULL AND g.status = 'queued'
                                      AND g.attempts > 0)
                        AND NOT EXISTS (SELECT 1 FROM jobs g
                                        WHERE g.queue = j.queue AND g.group_key = j.group_key
                                          AND g.group_key IS NOT NULL AND g.status = 'queued'
                                          AND (-g.priority, g.run_at, g.id)
                                              < (-j.priority, j.run_at, j.id))))))
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
$claim$;"""),
    (8, 'job_complete_and_claim_function', """\
-- 0008_job_complete_and_claim_function: a worker's round trip as one server-side call, job_complete_and_claim(ids, attempts, results, queue, batch, lease, now): the last batch's fenced complete, then the claim of the next (issue 18's drain).
-- Why (pgkick.store, complete_many_and_claim): the worker completed a batch and claimed the
-- next as two statements in one pipeline, and on a 2-core machine the client's cost of a
-- statement (its parameters, its cursor, its results) was most of the worker's CPU a job.
-- One call is one statement a round trip, and its complete is planned once a session, as
-- the claim's statements are (0007), where it was planned at every call before.
-- The order is the deadlock rule: the complete runs, and takes its row locks, before the
-- claim, as two statements in order do; one statement with both as CTEs would leave the
-- order to the executor (pgkick.store says what deadlocked). The rows returned: first each
-- completed job still held by this attempt, as its id with every other column NULL (a
-- claimed job always has a task), then the claimed jobs in claim order.
CREATE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],
                                       done_results text[], claim_queue text,
                                       claim_batch int, claim_lease interval,
                                       claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $round$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH done AS (
    UPDATE jobs j
    SET status = 'done', locked_until = NULL,
        finished_at = coalesce(claim_now, now()),
        result = held.result::jsonb
    FROM unnest(done_ids, done_attempts, done_results) AS held(id, attempts, result)
    WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
    RETURNING j.id
  )
  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int FROM done;
  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);
END
$round$;"""),
    (9, 'job_failed_index', """\
-- 0009_job_failed_index: the failed jobs, newest first, for `pgkick jobs --status failed` and the dashboard (a page of them, and each queue's count, without reading the finished history).
-- Partial: a row enters it only when its job ends failed (or is cancelled), so the
-- claim, the complete and the insert (the hot path) never write to it. Its queue is
-- included so that counting a queue's failures reads this index alone.
CREATE INDEX jobs_failed_idx ON jobs (id) INCLUDE (queue) WHERE status = 'failed';"""),
    (10, 'job_complete_function', """\
-- 0010_job_complete_function: the completion UPDATE as one server-side function, job_complete(ids, attempts, results, now), called by the worker's flush (job_complete_many) and by its round trip (job_complete_and_claim, recreated to call it): the fenced UPDATE written once.
-- Why: the UPDATE that marks a batch done was written twice, in job_complete_many.sql and
-- inside 0008's job_complete_and_claim, and a change to one (the fence, the result, the
-- clock) had to be made to both. Now both call this function. Each job is fenced by its
-- own attempt (status 'running' and the attempts the caller claimed it with): a worker
-- whose lease was taken over changes nothing, and the ids returned are those it still
-- held. Its plan is kept per session, as the claim's (0007).
CREATE FUNCTION job_complete(done_ids bigint[], done_attempts int[], done_results text[],
                             done_now timestamptz)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $complete$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  UPDATE jobs j
  SET status = 'done', locked_until = NULL,
      finished_at = coalesce(done_now, now()),
      result = held.result::jsonb
  FROM unnest(done_ids, done_attempts, done_results) AS held(id, attempts, result)
  WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
  RETURNING j.id;
END
$complete$;

-- The round trip of 0008, its complete now this function's (the order, complete before
-- claim, is unchanged: 0008 says why it is the deadlock rule).
CREATE OR REPLACE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],
                                                  done_results text[], claim_queue text,
                                                  claim_batch int, claim_lease interval,
                                                  claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $round$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int
  FROM job_complete(done_ids, done_attempts, done_results, claim_now) AS done;
  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);
END
$round$;"""),
    (11, 'job_group_order', """\
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
$claim$;"""),
    (12, 'job_trace_context', """\
-- 0012_job_trace_context: the W3C trace context of the span that enqueued a job (traceparent, tracestate), stored with it and returned by the claim (job_claim and job_complete_and_claim recreated with the new return shape: traceparent, tracestate, enqueued_at, run_at, claimed_at), so a worker can run the job in a span that is a child of the enqueuer's (pgkick[otel], docs/guide/tracing.md).
-- Why columns, not the payload: the payload is the app's, given to its task as it was
-- enqueued; a trace context in it would show up in the task's input and in its unique
-- keys' meaning. NULL when the producer had no active span (or no OpenTelemetry): a NULL
-- costs no storage beyond the row's null bitmap.
ALTER TABLE jobs ADD COLUMN traceparent text, ADD COLUMN tracestate text;

-- A function's return shape cannot be changed in place (CREATE OR REPLACE refuses it), and
-- a dropped function loses its grants. pgkick's own roles get theirs back from role_setup,
-- which `migrate` runs again after applying migrations where the roles were set up; the
-- grants an operator gave other roles (a read-only dashboard's, a second worker role's)
-- are kept here and given again to the new functions, and every role that may insert a
-- payload may insert the new columns, as the producer's statements now name them.
CREATE TEMPORARY TABLE pgkick_0012_grants ON COMMIT DROP AS
SELECT p.oid::regprocedure::text AS function_name, a.grantee
FROM pg_catalog.pg_proc AS p,
     LATERAL aclexplode(p.proacl) AS a
WHERE p.pronamespace = current_schema()::regnamespace
  AND p.proname IN ('job_claim', 'job_complete_and_claim')
  AND p.proacl IS NOT NULL
  AND a.privilege_type = 'EXECUTE';

DO $grant$
DECLARE
  role_oid oid;
BEGIN
  FOR role_oid IN
    SELECT DISTINCT a.grantee
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'payload'
      AND a.privilege_type = 'INSERT'
  LOOP
    EXECUTE format('GRANT INSERT (traceparent, tracestate) ON jobs TO %s',
                   CASE WHEN role_oid = 0 THEN 'PUBLIC' ELSE role_oid::regrole::text END);
  END LOOP;
END
$grant$;

-- job_complete_and_claim returns job_claim's rows: both go, and come back with the new shape.
DROP FUNCTION job_complete_and_claim(bigint[], int[], text[], text, int, interval, timestamptz);
DROP FUNCTION job_claim(text, int, interval, timestamptz);

-- The claim of 0011, unchanged but for the columns it returns (its plan choices, the
-- unlocked branch and the locked one, are 0007's and 0011's: read them there).
CREATE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                          claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz)
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
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
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
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;

-- The round trip of 0010, unchanged but for the columns it returns.
CREATE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],
                                       done_results text[], claim_queue text,
                                       claim_batch int, claim_lease interval,
                                       claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $round$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int,
         NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz
  FROM job_complete(done_ids, done_attempts, done_results, claim_now) AS done;
  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);
END
$round$;

-- The grants the old functions had (none on a fresh install: role_setup gives them).
DO $regrant$
DECLARE
  kept record;
BEGIN
  FOR kept IN SELECT DISTINCT function_name FROM pgkick_0012_grants LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', kept.function_name);
  END LOOP;
  FOR kept IN SELECT * FROM pgkick_0012_grants LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', kept.function_name,
                   CASE WHEN kept.grantee = 0 THEN 'PUBLIC' ELSE kept.grantee::regrole::text END);
  END LOOP;
END
$regrant$;"""),
    (13, 'queue_watcher_listen', """\
-- 0013_queue_watcher_listen: a lingering worker's wake-up channel, so a producer whose kick reservation finds it NOTIFYs it instead of leaving the job to its next pause.
-- Both stay NULL for a pending kick and for a worker that is not listening (behind a
-- transaction-mode pooler, or with PGKICK_WORKER_LISTEN=off): producers notify only a
-- row whose listening_until is still ahead, so a worker that went back to work stops
-- being notified when its window ends, without a write of its own.
ALTER TABLE queue_watchers
  ADD COLUMN channel text,                  -- what the worker LISTENs on (pgkick.worker.linger)
  ADD COLUMN listening_until timestamptz;   -- past this instant, no NOTIFY for this worker"""),
    (14, 'queue_rate_concurrency_pause', """\
-- 0014_queue_rate_concurrency_pause: rate limits per key (N starts per sliding period: jobs.rate_key, queue_limits.rate_limit/rate_period, job_starts), concurrency per group key with a round-robin claim across keys (queue_limits.concurrency, queue_claim_cursors), and queue pause (queue_limits.paused); job_claim enforces all of them (issue 33, pgkick.store.flow has the rules).
-- Why a table of starts, not jobs.claimed_at: a job retried or snoozed inside the window is
-- claimed again and its claimed_at overwritten; the first start would be forgotten and the
-- window counted one short. A start is a row written by the claim that made it, under the
-- queue's claim lock, so "N per period" is exact under any number of workers.
ALTER TABLE queue_limits
  ALTER COLUMN max_running DROP NOT NULL,
  ADD COLUMN rate_limit int CHECK (rate_limit >= 1),
  ADD COLUMN rate_period interval
    CHECK (rate_period >= interval '1 second' AND rate_period <= interval '1 day'),
  ADD COLUMN concurrency int CHECK (concurrency >= 1),
  ADD COLUMN paused boolean NOT NULL DEFAULT false,
  ADD CONSTRAINT queue_limits_rate_whole CHECK ((rate_limit IS NULL) = (rate_period IS NULL));

ALTER TABLE jobs ADD COLUMN rate_key text,
  ADD CONSTRAINT jobs_rate_key_named CHECK (rate_key <> '');

-- One row per job started in a queue with a rate ('' : the queue's own bucket, for jobs
-- without a rate_key); pruned by the claim two periods on.
CREATE TABLE job_starts (
  queue      text        NOT NULL,
  rate_key   text        NOT NULL,
  started_at timestamptz NOT NULL
);
-- One index: the claim counts a key's window and prunes the keys it starts through it (an
-- index on (queue, started_at) would tempt a generic plan to count a key's window by
-- scanning every key's).
CREATE INDEX job_starts_key_idx ON job_starts (queue, rate_key, started_at);

-- Where the round-robin claim of a queue left off: the last key it took a job of
-- ('' : the bucket of jobs with neither key).
CREATE TABLE queue_claim_cursors (
  queue     text PRIMARY KEY CHECK (queue <> ''),
  after_key text
);

-- A rate-keyed job gets its fixed place (ordered_at) as a grouped one does (0011).
DROP TRIGGER jobs_ordered_at ON jobs;
CREATE TRIGGER jobs_ordered_at BEFORE INSERT ON jobs
FOR EACH ROW WHEN (NEW.group_key IS NOT NULL OR NEW.rate_key IS NOT NULL)
EXECUTE FUNCTION job_ordered_at_set();

-- The round-robin claim walks a queue's keys (a group key, else a rate key) one index probe
-- at a time and takes each key's first jobs in its fixed order.
CREATE INDEX jobs_key_queued_idx ON jobs (queue, (coalesce(group_key, rate_key)), (-priority),
                                          ordered_at, id)
  WHERE status = 'queued' AND (group_key IS NOT NULL OR rate_key IS NOT NULL);

-- The round-robin claim of a queue with a rate or a concurrency: called by job_claim under
-- the queue's claim lock (READ COMMITTED: each statement here sees every claim committed
-- before the lock). Returns the ids to claim and writes the starts and the cursor.
CREATE FUNCTION job_claim_fair_ids(claim_queue text, claim_free int, at timestamptz,
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
  stop_key text;
  fast_ids bigint[];
  fast_rkeys text[];
  fast_last text;
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
  SELECT c.after_key INTO stop_key FROM queue_claim_cursors c WHERE c.queue = claim_queue;
  stop_key := coalesce(stop_key, '');
  -- The common case in one statement (no PL/pgSQL step a key): lap 1 over the keys after
  -- the cursor, each key's head if its group has room and its rate key a start left, the
  -- walk stopping (a recursive CTE runs on demand) once claim_free heads are found. Taken
  -- only if it fills the batch with distinct rate keys (each key's room was counted for
  -- one start) and every row locks; else the walk below does the whole claim.
  SELECT array_agg(f.id ORDER BY f.n), array_agg(f.rk ORDER BY f.n),
         (array_agg(f.k ORDER BY f.n DESC))[1]
  INTO fast_ids, fast_rkeys, fast_last
  FROM (
    -- Each step is one index probe: the first queued job after the last key in the keys'
    -- index order is the next key's first job, its head unless it is a rate-keyed job not
    -- due yet (then the head is looked up: the key's first due or grouped job).
    WITH RECURSIVE walk (n, k, id, group_key, rate_key, run_at) AS (
      (SELECT 1, coalesce(j.group_key, j.rate_key), j.id, j.group_key, j.rate_key, j.run_at
       FROM jobs j
       WHERE j.queue = claim_queue AND j.status = 'queued'
         AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)
         AND coalesce(j.group_key, j.rate_key) > stop_key
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
    SELECT w.n, w.k, h.id, coalesce(h.rate_key, '') AS rk
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
    WHERE h.run_at <= at
      AND (h.group_key IS NULL
           OR (SELECT count(*) FROM jobs r
               WHERE r.queue = claim_queue AND r.group_key = h.group_key
                 AND r.group_key IS NOT NULL AND r.status = 'running') < per_key)
      AND (rate_n IS NULL
           OR (SELECT count(*) FROM job_starts s
               WHERE s.queue = claim_queue AND s.rate_key = coalesce(h.rate_key, '')
                 AND s.started_at > at - rate_span) < rate_n)
    LIMIT claim_free
  ) f;
  IF cardinality(fast_ids) = claim_free
     AND (rate_n IS NULL
          OR (SELECT count(DISTINCT r) FROM unnest(fast_rkeys) AS r) = claim_free)
     AND cardinality(ARRAY(SELECT j.id FROM jobs j
                           WHERE j.id = ANY (fast_ids) AND j.status = 'queued'
                           FOR UPDATE SKIP LOCKED)) = claim_free
  THEN
    ids := fast_ids;
    rkeys := fast_rkeys;
    last_taken := fast_last;
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
        -- Jobs with neither key: the first hundred in claim order (a backlog of keyed jobs
        -- ahead of them is served key by key, so they come forward).
        FOR cand IN
          SELECT f.id FROM (SELECT j.id, j.group_key, j.rate_key FROM jobs j
                            WHERE j.queue = claim_queue AND j.status = 'queued'
                              AND j.run_at <= at
                            ORDER BY j.priority DESC, j.run_at LIMIT 100) f
          WHERE f.group_key IS NULL AND f.rate_key IS NULL
        LOOP
          EXIT WHEN key_taken >= share OR cardinality(ids) >= claim_free;
          CONTINUE WHEN cand.id = ANY (ids);
          IF rate_n IS NOT NULL THEN
            used := (SELECT count(*) FROM job_starts s
                     WHERE s.queue = claim_queue AND s.rate_key = ''
                       AND s.started_at > at - rate_span)
                    + coalesce(cardinality(array_positions(rkeys, '')), 0);
            EXIT WHEN used >= rate_n;
          END IF;
          PERFORM 1 FROM jobs j WHERE j.id = cand.id AND j.status = 'queued'
            FOR UPDATE SKIP LOCKED;
          CONTINUE WHEN NOT FOUND;
          ids := ids || cand.id;
          rkeys := rkeys || ''::text;
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
          IF rate_n IS NOT NULL THEN
            used := (SELECT count(*) FROM job_starts s
                     WHERE s.queue = claim_queue AND s.rate_key = rk
                       AND s.started_at > at - rate_span)
                    + coalesce(cardinality(array_positions(rkeys, rk)), 0);
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
  IF rate_n IS NOT NULL AND cardinality(ids) > 0 THEN
    -- Starts are counted from at - period with no upper bound: a claim whose now() (its
    -- transaction's start) is older than a start recorded by a claim that took the lock
    -- first still counts that start, so no window of the starts' own times ever holds
    -- more than rate_n. The keys started here lose their starts older than two periods
    -- (a period more than needed, for the same reason): a key keeps at most the starts
    -- of the two periods before its last claim.
    DELETE FROM job_starts s
    WHERE s.queue = claim_queue AND s.rate_key = ANY (rkeys)
      AND s.started_at <= at - 2 * rate_span;
    INSERT INTO job_starts (queue, rate_key, started_at)
    SELECT claim_queue, r, at FROM unnest(rkeys) AS r;
  END IF;
  IF last_taken IS NOT NULL THEN
    INSERT INTO queue_claim_cursors AS c (queue, after_key) VALUES (claim_queue, last_taken)
    ON CONFLICT (queue) DO UPDATE SET after_key = excluded.after_key;
  END IF;
  RETURN ids;
END
$fair$;

-- What job_claim_fair_ids would take now, read only (no lock, no start, no cursor): the
-- ready checks' answer for a queue with a rate or a concurrency (job_ready_exists asks for 1,
-- job_ready_count_by_queue for all). A function, so those statements (run at every hand-over
-- and reap) stay as cheap to plan for queues without limits as they were; its own plans are
-- kept by the session. Counts the ready jobs with neither key if the queue's bucket has a
-- start left, plus one for each key with a ready job its rate and its group's concurrency
-- admit (a group's first `concurrency` jobs in its order, less those running).
CREATE FUNCTION job_ready_fair_count(ready_queue text, at timestamptz, up_to int)
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
     AND (SELECT count(*) FROM job_starts s
          WHERE s.queue = ready_queue AND s.rate_key = ''
            AND s.started_at > at - lim.rate_period) >= lim.rate_limit
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
                   OR (SELECT count(*) FROM job_starts s
                       WHERE s.queue = ready_queue AND s.rate_key = keys.k
                         AND s.started_at > at - lim.rate_period) < lim.rate_limit))
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
                      OR (SELECT count(*) FROM job_starts s
                          WHERE s.queue = ready_queue
                            AND s.rate_key = coalesce(h.rate_key, '')
                            AND s.started_at > at - lim.rate_period) < lim.rate_limit)))
      LIMIT up_to - unkeyed) f);
END
$ready$;

-- The claim of 0012 (same signature, return shape and grants: CREATE OR REPLACE keeps them;
-- job_complete_and_claim calls it by name and is unchanged). The plain branch is 0012's,
-- untouched. The locked branch now reads the queue's row first: a paused queue claims
-- nothing; a queue with a rate or a concurrency is claimed round-robin by
-- job_claim_fair_ids; any other is claimed by 0012's statement, unchanged.
CREATE OR REPLACE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                                     claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $claim$
#variable_conflict use_column
DECLARE
  at timestamptz := coalesce(claim_now, now());
  lim record;
  free int;
  fair_ids bigint[];
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
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
    ORDER BY c.priority DESC, c.run_at, c.id;
    RETURN;
  END IF;

  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('pgkick.claim'), hashtext(claim_queue));
  SELECT l.max_running, l.rate_limit, l.rate_period, l.concurrency, l.paused INTO lim
  FROM queue_limits l WHERE l.queue = claim_queue;
  IF lim.paused THEN
    RETURN;  -- a paused queue: nothing is claimed until `pgkick resume`
  END IF;
  IF lim.rate_limit IS NOT NULL OR lim.concurrency IS NOT NULL THEN
    free := claim_batch;
    IF lim.max_running IS NOT NULL THEN
      free := least(free, lim.max_running - (SELECT count(*) FROM jobs r
                                             WHERE r.queue = claim_queue
                                               AND r.status = 'running')::int);
    END IF;
    IF free <= 0 THEN
      RETURN;
    END IF;
    fair_ids := job_claim_fair_ids(claim_queue, free, at, lim.rate_limit, lim.rate_period,
                                   coalesce(lim.concurrency, 1));
    RETURN QUERY
    WITH claimed AS (
      UPDATE jobs j
      SET status       = 'running',
          attempts     = j.attempts + 1,
          locked_until = at + claim_lease,
          claimed_at   = coalesce(claim_now, clock_timestamp())
      WHERE j.id = ANY (fair_ids)
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
    ORDER BY array_position(fair_ids, c.id);
    RETURN;
  END IF;
  RETURN QUERY
  WITH next AS (
    -- 0011's head rule (read it there): one running job a group, its head only.
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
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;

-- Roles an operator made (not pgkick's own: role_setup, run again by `migrate`, grants
-- theirs): a role that claims (may update a job's status) now records starts and cursors in
-- its claims and reads the starts in its sweeps; a role that inserts payloads may name a
-- rate key and reads the pause flag when it reserves its kick.
DO $grant$
DECLARE
  role_name text;
BEGIN
  FOR role_name IN
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'status' AND a.privilege_type = 'UPDATE'
    UNION
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_class AS t, LATERAL aclexplode(t.relacl) AS a
    WHERE t.oid = 'jobs'::regclass AND a.privilege_type = 'UPDATE'
  LOOP
    EXECUTE format('GRANT SELECT, INSERT, DELETE ON job_starts TO %s', role_name);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON queue_claim_cursors TO %s', role_name);
  END LOOP;
  FOR role_name IN
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'payload' AND a.privilege_type = 'INSERT'
    UNION
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_class AS t, LATERAL aclexplode(t.relacl) AS a
    WHERE t.oid = 'jobs'::regclass AND a.privilege_type = 'INSERT'
  LOOP
    EXECUTE format('GRANT INSERT (rate_key) ON jobs TO %s', role_name);
    EXECUTE format('GRANT SELECT (queue, paused) ON queue_limits TO %s', role_name);
  END LOOP;
END
$grant$;"""),
    (15, 'job_insert_flow_function', """\
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
                                       timestamptz) FROM PUBLIC;"""),
    (17, 'job_dependencies', "-- 0017_job_dependencies: jobs that wait for others (issue 34): a job status 'waiting', the job_dependencies table (child, parent, policy), a flag on parents that have dependants, the server-side job_await that links children to existing parents, and the trigger that releases, fails or cancels dependants when a parent finishes, transitively. (A waiting job holds its unique key: the live-key index and job_insert_flow name 'waiting' since 0015.)\n-- Why in the database: the dependant must become ready in the transaction that finishes its\n-- last parent, whoever finishes it (a worker's complete or fail, the reaper, an operator's\n-- cancel), with no poller. Why a flag column (has_dependants) and a WHEN clause: the trigger\n-- is queued only for a row that has dependants; every other completion pays one boolean test.\n-- Why a counter (waiting_on) on the child: the last parent to finish is the one whose\n-- decrement reaches 0; two parents finishing at once both update the child's row, and its\n-- row lock orders them, so exactly one of them releases it.\n-- Released queues are appended to the transaction-local setting pgkick.released_queues\n-- (newline-separated; queue names are printable): the worker's complete statements read it\n-- in the same statement (sql/job_complete_many.sql) and kick those queues, with no extra\n-- statement for jobs without dependants.\nALTER TABLE jobs DROP CONSTRAINT jobs_status_check;\nALTER TABLE jobs ADD CONSTRAINT jobs_status_check\n  CHECK (status IN ('waiting', 'queued', 'running', 'done', 'failed'));\nALTER TABLE jobs\n  ADD COLUMN has_dependants boolean NOT NULL DEFAULT false,\n  ADD COLUMN waiting_on int NOT NULL DEFAULT 0,\n  ADD CONSTRAINT jobs_waiting_iff_counted CHECK ((status = 'waiting') = (waiting_on > 0));\n\nCREATE TABLE job_dependencies (\n  child_id  bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,\n  parent_id bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,\n  policy    text   NOT NULL CHECK (policy IN ('fail', 'cancel', 'run anyway')),\n  PRIMARY KEY (parent_id, child_id),\n  CONSTRAINT job_dependencies_not_self CHECK (child_id <> parent_id)\n);\nCREATE INDEX job_dependencies_child_idx ON job_dependencies (child_id);\n\n-- Links children (just inserted in the caller's transaction, still queued) to their parents:\n-- pairs (child, parent, policy). Parents must exist (so no cycle can be made) and\n-- are locked by the flag's update, so none finishes unseen between the look and the commit.\n-- A parent already done (or failed under 'run anyway') counts as finished; one failed under\n-- 'fail' or 'cancel' ends the child at once. Returns the children left waiting. SECURITY DEFINER: a producer may neither\n-- read a job's status nor update it.\nCREATE FUNCTION job_await(child_ids bigint[], parent_ids bigint[], policies text[],\n                          await_now timestamptz)\nRETURNS TABLE (id bigint)\nLANGUAGE plpgsql VOLATILE SECURITY DEFINER\nSET search_path FROM CURRENT\nAS $await$\n#variable_conflict use_column\nDECLARE\n  missing bigint;\n  bad_policy text;\n  at timestamptz := coalesce(await_now, now());\n  p_ids bigint[];\n  p_status text[];\n  p_errors text[];\nBEGIN\n  SELECT p INTO bad_policy FROM unnest(policies) AS p\n  WHERE p IS NULL OR p NOT IN ('fail', 'cancel', 'run anyway') LIMIT 1;\n  IF FOUND THEN\n    RAISE EXCEPTION 'pgkick: unknown dependency policy %', coalesce(bad_policy, 'NULL')\n      USING HINT = 'use fail, cancel or run anyway', ERRCODE = '22023';\n  END IF;\n  -- Locked in id order (as a batch's complete mostly goes), then flagged.\n  WITH locked AS (\n    SELECT l.id FROM jobs l WHERE l.id = ANY (parent_ids) ORDER BY l.id FOR UPDATE\n  ), flagged AS (\n    UPDATE jobs j SET has_dependants = true\n    FROM locked WHERE j.id = locked.id\n    RETURNING j.id, j.status, j.last_error\n  )\n  SELECT array_agg(f.id), array_agg(f.status), array_agg(f.last_error)\n  INTO p_ids, p_status, p_errors\n  FROM flagged f;\n  SELECT p INTO missing FROM unnest(parent_ids) AS p\n  WHERE p_ids IS NULL OR p <> ALL (p_ids) LIMIT 1;\n  IF FOUND THEN\n    RAISE EXCEPTION 'pgkick: parent job % does not exist in schema %', missing, current_schema()\n      USING HINT = 'a job can wait only for jobs enqueued before it', ERRCODE = '23503';\n  END IF;\n  INSERT INTO job_dependencies (child_id, parent_id, policy)\n  SELECT c, p, pol FROM unnest(child_ids, parent_ids, policies) AS x(c, p, pol)\n  ON CONFLICT (parent_id, child_id) DO NOTHING;\n  -- A parent already failed under 'fail' or 'cancel': the child ends now, with the reason.\n  UPDATE jobs j\n  SET status = 'failed', finished_at = at,\n      last_error = left(CASE WHEN x.pol = 'cancel' THEN 'cancelled: ' ELSE '' END\n                        || format('parent job %s failed: %s', f.id, f.last_error), 2000)\n  FROM unnest(child_ids, parent_ids, policies) AS x(c, p, pol)\n  JOIN unnest(p_ids, p_status, p_errors) AS f(id, status, last_error) ON f.id = x.p\n  WHERE j.id = x.c AND j.status = 'queued' AND f.status = 'failed' AND x.pol <> 'run anyway';\n  RETURN QUERY\n  WITH pending AS (\n    SELECT x.c, count(*)::int AS n\n    FROM unnest(child_ids, parent_ids) AS x(c, p)\n    JOIN unnest(p_ids, p_status) AS f(id, status) ON f.id = x.p\n    WHERE f.status NOT IN ('done', 'failed')\n    GROUP BY x.c\n  )\n  UPDATE jobs j SET status = 'waiting', waiting_on = pending.n\n  FROM pending WHERE j.id = pending.c AND j.status = 'queued'\n  RETURNING j.id;\nEND\n$await$;\n\n-- A parent left its state: release, fail or cancel the dependants still waiting. Fired only\n-- for rows with dependants (the trigger's WHEN). A child failed or cancelled here is itself\n-- updated, which fires this trigger again for its own dependants: the propagation is\n-- transitive.\nCREATE FUNCTION job_dependants_settle() RETURNS trigger\nLANGUAGE plpgsql SECURITY DEFINER\nSET search_path FROM CURRENT\nAS $settle$\nDECLARE\n  released text;\nBEGIN\n  IF NEW.status = 'failed' THEN\n    UPDATE jobs c\n    SET status = 'failed', waiting_on = 0, finished_at = now(),\n        last_error = left(CASE WHEN d.policy = 'cancel' THEN 'cancelled: ' ELSE '' END\n                          || format('parent job %s failed: %s', NEW.id, NEW.last_error), 2000)\n    FROM job_dependencies d\n    WHERE d.parent_id = NEW.id AND d.policy <> 'run anyway' AND c.id = d.child_id\n      AND c.status = 'waiting';\n  END IF;\n  WITH counted AS (\n    UPDATE jobs c\n    SET waiting_on = c.waiting_on - 1,\n        status = CASE WHEN c.waiting_on = 1 THEN 'queued' ELSE 'waiting' END\n    FROM job_dependencies d\n    WHERE d.parent_id = NEW.id AND c.id = d.child_id AND c.status = 'waiting'\n      AND (NEW.status = 'done' OR d.policy = 'run anyway')\n    RETURNING c.queue, c.status\n  )\n  SELECT string_agg(DISTINCT queue, E'\\n') INTO released FROM counted WHERE status = 'queued';\n  IF released IS NOT NULL THEN\n    PERFORM set_config('pgkick.released_queues',\n                       concat_ws(E'\\n', nullif(current_setting('pgkick.released_queues', true), ''),\n                                 released), true);\n  END IF;\n  RETURN NULL;\nEND\n$settle$;\n\nCREATE TRIGGER jobs_dependants_settle AFTER UPDATE OF status ON jobs\nFOR EACH ROW WHEN (NEW.has_dependants AND OLD.status IS DISTINCT FROM NEW.status\n                   AND NEW.status IN ('done', 'failed'))\nEXECUTE FUNCTION job_dependants_settle();"),
    (18, 'job_steps', """\
-- 0018_job_steps: durable steps (job.step, job.sleep): each step's JSON result stored with its job, written only by the attempt that holds it, so a retry or a continuation replays finished steps instead of running them again; and each job's continuations (a fresh invocation taking over when the time left is too short for its next step).
-- One row per step a job finished. Why a table, not a jsonb column on jobs: a step write
-- is one small INSERT (never a rewrite of the job's row and its payload, never a dead
-- version of it), and a job of 500 steps does not make every claim read 500 results.
-- Deleted with its job (purge).
CREATE TABLE job_steps (
  job_id      bigint      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  name        text        NOT NULL,
  args_hash   text        NOT NULL,   -- sha256 of the arguments' JSON: a name reused with others is refused
  result      jsonb,                  -- what the step's function returned (NULL for None)
  attempt     int         NOT NULL,   -- the attempt that wrote it (the fencing token then)
  duration_ms int         NOT NULL,   -- on the invocation's own clock: the next step's estimate
  wake_at     timestamptz,            -- a sleep's end (job.sleep); NULL for a step
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (job_id, name)
);

-- How many times the job was continued (re-queued by the time budget, no attempt used),
-- and whether its last continuation came before any step ran in that invocation (it was
-- claimed too late for its next step). Such a job runs its next step whatever the estimate:
-- a step longer than a whole invocation would otherwise be continued for ever.
ALTER TABLE jobs
  ADD COLUMN continued         int     NOT NULL DEFAULT 0,
  ADD COLUMN continued_stalled boolean NOT NULL DEFAULT false;"""),
    (19, 'job_dependants_revive', """\
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
EXECUTE FUNCTION job_dependants_revive();"""),
    (20, 'job_running_index', """\
-- 0020_job_running_index: one index of the running jobs, on (queue, group_key), in place of 0004's two (jobs_running_idx on queue, jobs_group_running_idx on grouped jobs): a group's running count can no longer be planned through the queue-wide one, and a claim writes one running index entry, not two.
-- Why: the round-robin claim (0014) counts each candidate group's running jobs in a plan
-- kept by the session (generic). When the statistics had seen no running job, both
-- partial indexes looked equally cheap and the plan could take the queue-wide one, then
-- read every running job of the queue (a heap fetch each, to filter on group_key) for
-- every key of every claim: 0.095 ms a key at 1,000 running jobs, a claim-and-complete
-- cycle of 2.3 ms against 1.1 ms with none (docs/guide/flow-control.md). With one index
-- there is no wrong one to pick:
-- - a queue's running count (its limit, the hand-over's checks) scans the queue's prefix,
--   as jobs_running_idx did;
-- - a group's running count reads that group's entries only;
-- - the plain claim's "any grouped job running?" (min(group_key) ... IS NOT NULL) stops at
--   the first entry: NULLs sort last, and IS NOT NULL ends a forward scan at the first NULL.
DROP INDEX jobs_running_idx;
DROP INDEX jobs_group_running_idx;
CREATE INDEX jobs_running_idx ON jobs (queue, group_key) WHERE status = 'running';"""),
    (21, 'job_claim_fair_fewer_statements', """\
-- 0021_job_claim_fair_fewer_statements: the round-robin claim (0014's job_claim_fair_ids: same signature, rules and writes) in three statements instead of six when its one-statement walk fills the batch: the cursor is read by the walk's statement, whose aggregate also gives the last key (no second sort) and whether the rate keys are distinct, and the starts' prune, the starts and the cursor are written by one statement.
-- Why: the claim of a queue with a rate and a concurrency per key cost x1.33..x1.37 the
-- plain claim (issue 33's target: 1.3x). Each statement in a PL/pgSQL function pays an
-- executor start-up and end, and the walk's last key was a third ordered aggregate sorted
-- apart (descending). A perf profile of the server over the bench's cycles: the keyed
-- cycle's executor start-ups fell by ~25 us and its page faults (memory the server's
-- allocator handed back between statements and faulted in again) from ~80 to ~6 us.
-- Measured side by side with the plain claim in the same runs: docs/guide/flow-control.md.
-- What is claimed, in what order, and what is written are 0014's; tests/test_flow_control.py
-- runs against this function.
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
  stop_key text;
  fast_ids bigint[];
  fast_rkeys text[];
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
         array_agg(f.k ORDER BY f.n), bool_and(f.rk = f.k), (SELECT cursor_at.k FROM cursor_at)
  INTO fast_ids, fast_rkeys, fast_keys, fast_distinct, stop_key
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
    SELECT w.n, w.k, h.id, coalesce(h.rate_key, '') AS rk
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
    WHERE h.run_at <= at
      AND (h.group_key IS NULL
           OR (SELECT count(*) FROM jobs r
               WHERE r.queue = claim_queue AND r.group_key = h.group_key
                 AND r.group_key IS NOT NULL AND r.status = 'running') < per_key)
      AND (rate_n IS NULL
           OR (SELECT count(*) FROM job_starts s
               WHERE s.queue = claim_queue AND s.rate_key = coalesce(h.rate_key, '')
                 AND s.started_at > at - rate_span) < rate_n)
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
        -- Jobs with neither key: the first hundred in claim order (a backlog of keyed jobs
        -- ahead of them is served key by key, so they come forward).
        FOR cand IN
          SELECT f.id FROM (SELECT j.id, j.group_key, j.rate_key FROM jobs j
                            WHERE j.queue = claim_queue AND j.status = 'queued'
                              AND j.run_at <= at
                            ORDER BY j.priority DESC, j.run_at LIMIT 100) f
          WHERE f.group_key IS NULL AND f.rate_key IS NULL
        LOOP
          EXIT WHEN key_taken >= share OR cardinality(ids) >= claim_free;
          CONTINUE WHEN cand.id = ANY (ids);
          IF rate_n IS NOT NULL THEN
            used := (SELECT count(*) FROM job_starts s
                     WHERE s.queue = claim_queue AND s.rate_key = ''
                       AND s.started_at > at - rate_span)
                    + coalesce(cardinality(array_positions(rkeys, '')), 0);
            EXIT WHEN used >= rate_n;
          END IF;
          PERFORM 1 FROM jobs j WHERE j.id = cand.id AND j.status = 'queued'
            FOR UPDATE SKIP LOCKED;
          CONTINUE WHEN NOT FOUND;
          ids := ids || cand.id;
          rkeys := rkeys || ''::text;
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
          IF rate_n IS NOT NULL THEN
            used := (SELECT count(*) FROM job_starts s
                     WHERE s.queue = claim_queue AND s.rate_key = rk
                       AND s.started_at > at - rate_span)
                    + coalesce(cardinality(array_positions(rkeys, rk)), 0);
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
    -- from a bucket, so the cursor moves whenever ids is not empty.
    WITH pruned AS (
      DELETE FROM job_starts s
      WHERE rate_n IS NOT NULL AND s.queue = claim_queue AND s.rate_key = ANY (rkeys)
        AND s.started_at <= at - 2 * rate_span
    ), started AS (
      INSERT INTO job_starts (queue, rate_key, started_at)
      SELECT claim_queue, r, at FROM unnest(rkeys) AS r WHERE rate_n IS NOT NULL
    )
    INSERT INTO queue_claim_cursors AS c (queue, after_key) VALUES (claim_queue, last_taken)
    ON CONFLICT (queue) DO UPDATE SET after_key = excluded.after_key;
  END IF;
  RETURN ids;
END
$fair$;"""),
    (22, 'job_starts_numbered', """\
-- 0022_job_starts_numbered: a rate's window counted in two index probes a key, not one row read a start: each start of a key gets the next number of that key (job_starts.seq) and a time no earlier than the key's last start, so the starts in a window are the numbers from its first to the key's last; job_claim_fair_ids (0021's: same signature, rules and claims) and job_ready_fair_count (0014's: same answer) count them so.
-- Why: the claim counted a key's starts in the window row by row (an index entry and, for
-- starts younger than the last vacuum, a heap visit each): a key started at its rate keeps
-- up to rate_limit starts in its window, and a head was checked in ~1.3 us a start (13 us
-- at 10 starts, ~100 us at 350; docs/guide/flow-control.md). Two probes cost the same
-- at 10 starts and stay there at any number.
-- The count holds because a key's numbers and times rise together: a claim whose now()
-- (its transaction's start) is older than the key's last start, recorded by a claim that
-- took the queue's lock first, records its start at that last start's time. That start is
-- counted at least as long as at its own time, so no window of the recorded times holds
-- more than the rate (0014's rule, which counts from at - period with no upper bound). The
-- prunes (this claim's, two periods on; the reaper's, job_start_purge_stale) delete a key's
-- oldest starts, never one between two that stay, so the numbers in a window have no gap.
-- Starts are written only here, under the queue's claim lock: a key's next number is read
-- after the last claim's commit.
-- job_ready_fair_count (0014's ready checks) counts its windows the same way. queue_heal_plan,
-- which books a held key's wake-up from the rate_limit-th newest start, still reads the
-- window (once a sweep, for the held keys only).
ALTER TABLE job_starts ADD COLUMN seq bigint;
UPDATE job_starts s SET seq = n.seq
FROM (SELECT ctid AS row_at,
             row_number() OVER (PARTITION BY queue, rate_key ORDER BY started_at) AS seq
      FROM job_starts) n
WHERE s.ctid = n.row_at;
ALTER TABLE job_starts ALTER COLUMN seq SET NOT NULL;
-- Ordered by time then number (the same order, as they rise together): the window's first
-- start is a forward probe from at - period, the key's last a backward one.
DROP INDEX job_starts_key_idx;
CREATE INDEX job_starts_key_idx ON job_starts (queue, rate_key, started_at, seq);

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
  last_seq bigint;
  last_at timestamptz;
  stop_key text;
  fast_ids bigint[];
  fast_rkeys text[];
  fast_rlast bigint[];
  fast_rlast_at timestamptz[];
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
         array_agg(f.last_seq ORDER BY f.n), array_agg(f.last_at ORDER BY f.n)
  INTO fast_ids, fast_rkeys, fast_keys, fast_distinct, stop_key, fast_rlast, fast_rlast_at
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
    SELECT w.n, w.k, h.id, coalesce(h.rate_key, '') AS rk, st.last_seq, st.last_at
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
         -- the head's rate key's last start (its number and time), with a rate only
         LEFT JOIN LATERAL (SELECT s.seq AS last_seq, s.started_at AS last_at
                            FROM job_starts s
                            WHERE rate_n IS NOT NULL AND s.queue = claim_queue
                              AND s.rate_key = coalesce(h.rate_key, '')
                            ORDER BY s.started_at DESC, s.seq DESC LIMIT 1) st ON true
    WHERE h.run_at <= at
      AND (h.group_key IS NULL
           OR (SELECT count(*) FROM jobs r
               WHERE r.queue = claim_queue AND r.group_key = h.group_key
                 AND r.group_key IS NOT NULL AND r.status = 'running') < per_key)
      AND (rate_n IS NULL
           OR coalesce(st.last_seq
                     - (SELECT s.seq FROM job_starts s
                        WHERE s.queue = claim_queue AND s.rate_key = coalesce(h.rate_key, '')
                          AND s.started_at > at - rate_span
                        ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0) < rate_n)
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
        -- Jobs with neither key: the first hundred in claim order (a backlog of keyed jobs
        -- ahead of them is served key by key, so they come forward).
        FOR cand IN
          SELECT f.id FROM (SELECT j.id, j.group_key, j.rate_key FROM jobs j
                            WHERE j.queue = claim_queue AND j.status = 'queued'
                              AND j.run_at <= at
                            ORDER BY j.priority DESC, j.run_at LIMIT 100) f
          WHERE f.group_key IS NULL AND f.rate_key IS NULL
        LOOP
          EXIT WHEN key_taken >= share OR cardinality(ids) >= claim_free;
          CONTINUE WHEN cand.id = ANY (ids);
          last_seq := NULL;
          last_at := NULL;
          IF rate_n IS NOT NULL THEN
            SELECT s.seq, s.started_at INTO last_seq, last_at FROM job_starts s
            WHERE s.queue = claim_queue AND s.rate_key = ''
            ORDER BY s.started_at DESC, s.seq DESC LIMIT 1;
            used := coalesce(last_seq
                      - (SELECT s.seq FROM job_starts s
                         WHERE s.queue = claim_queue AND s.rate_key = ''
                           AND s.started_at > at - rate_span
                         ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0)
                    + coalesce(cardinality(array_positions(rkeys, '')), 0);
            EXIT WHEN used >= rate_n;
          END IF;
          PERFORM 1 FROM jobs j WHERE j.id = cand.id AND j.status = 'queued'
            FOR UPDATE SKIP LOCKED;
          CONTINUE WHEN NOT FOUND;
          ids := ids || cand.id;
          rkeys := rkeys || ''::text;
          rlast := rlast || last_seq;
          rlast_at := rlast_at || last_at;
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
          IF rate_n IS NOT NULL THEN
            SELECT s.seq, s.started_at INTO last_seq, last_at FROM job_starts s
            WHERE s.queue = claim_queue AND s.rate_key = rk
            ORDER BY s.started_at DESC, s.seq DESC LIMIT 1;
            used := coalesce(last_seq
                      - (SELECT s.seq FROM job_starts s
                         WHERE s.queue = claim_queue AND s.rate_key = rk
                           AND s.started_at > at - rate_span
                         ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0)
                    + coalesce(cardinality(array_positions(rkeys, rk)), 0);
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
    -- earlier than it; two starts of one bucket in this claim take two numbers.
    WITH pruned AS (
      DELETE FROM job_starts s
      WHERE rate_n IS NOT NULL AND s.queue = claim_queue AND s.rate_key = ANY (rkeys)
        AND s.started_at <= at - 2 * rate_span
    ), started AS (
      INSERT INTO job_starts (queue, rate_key, started_at, seq)
      SELECT claim_queue, u.rk, greatest(at, u.last_at),
             coalesce(u.last_seq, 0) + row_number() OVER (PARTITION BY u.rk)
      FROM unnest(rkeys, rlast, rlast_at) AS u (rk, last_seq, last_at)
      WHERE rate_n IS NOT NULL
    )
    INSERT INTO queue_claim_cursors AS c (queue, after_key) VALUES (claim_queue, last_taken)
    ON CONFLICT (queue) DO UPDATE SET after_key = excluded.after_key;
  END IF;
  RETURN ids;
END
$fair$;

-- 0014's read-only count of what job_claim_fair_ids would take now (the ready checks' answer
-- for a queue with a rate or a concurrency), its windows counted the same way: it runs at
-- every hand-over and sweep, and a queue whose keys are all held by their rate (the case
-- the sweep is for) had every key's window read row by row. Same signature and answer.
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
$ready$;"""),
    (23, 'job_starts_window_facts', """\
-- 0023_job_starts_window_facts: a key's rate checked in one index probe while its starts leave it room: each start records a fact about its key's numbers (job_starts.window_from, window_first: every start of the key timed after window_from is numbered window_first or above), and the claim counts a window from the key's last start's fact when the fact covers the window; the window's first start is probed only when the fact does not cover it or leaves the key no room. job_claim_fair_ids: 0022's, same signature, rules and claims.
-- Why: 0022 counts a key's window as last - first + 1 from two index probes, the key's last
-- start and the window's first, each an index descent and, for starts younger than the last
-- vacuum, a heap visit. The last start is read anyway (its number and time are the next
-- start's); the window's first cost ~20 us a head where a window holds many starts not yet
-- vacuumed (the walk's statement 444..543 us a claim of ten, 264..293 without it; a few us
-- a head at the bench's scale; docs/guide/flow-control.md).
-- The fact holds for ever once true: starts are numbered in the order of their times (0022),
-- a later start takes a higher number, and prunes only delete. So if a window begins no
-- earlier than a fact's window_from (at - period >= window_from), its starts are numbered
-- from window_first at least: it holds at most last - window_first + 1, and if that is under
-- the rate the key has room, with no probe. Otherwise the window's first start is probed
-- (0022's count, exact) and its number, with at - period, is the new start's fact. A start
-- admitted on a fact carries that fact on, so the bound loosens by one a start until it
-- reaches the rate and a probe tightens it: a key far under its rate is probed once in
-- (rate - count) starts, a key at its rate at every check, as before. The period compared
-- (window_from) keeps the rule exact when a claim's now() is older than the last start's or
-- the queue's period grows; a lower rate is compared as it is.
-- The columns' defaults are a fact true of any key (every start after -infinity is numbered
-- 1 or above): existing starts carry it (their key's bound is its last number, probed once
-- that reaches the rate).
-- job_ready_fair_count and queue_heal_plan count as they did (exact; once a hand-over or a
-- sweep).
ALTER TABLE job_starts
  ADD COLUMN window_from timestamptz NOT NULL DEFAULT '-infinity',
  ADD COLUMN window_first bigint NOT NULL DEFAULT 1;

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
        -- Jobs with neither key: the first hundred in claim order (a backlog of keyed jobs
        -- ahead of them is served key by key, so they come forward).
        FOR cand IN
          SELECT f.id FROM (SELECT j.id, j.group_key, j.rate_key FROM jobs j
                            WHERE j.queue = claim_queue AND j.status = 'queued'
                              AND j.run_at <= at
                            ORDER BY j.priority DESC, j.run_at LIMIT 100) f
          WHERE f.group_key IS NULL AND f.rate_key IS NULL
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
$fair$;"""),
    (24, 'job_await_own_children', """\
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
$await$;"""),
    (25, 'function_search_path_pg_temp_last', "-- 0025_function_search_path_pg_temp_last: every pgkick function searches pg_temp last (search_path = the schema, then pg_temp), so no caller's temporary table or function shadows pgkick's inside them; migrations now run with the same path, so functions made later by `SET search_path FROM CURRENT` carry it too.\n-- Why: PostgreSQL searches pg_temp first when a search_path does not name it, and 0015, 0017,\n-- 0019 and 0024 gave their functions the schema alone. job_await and job_insert_flow are\n-- SECURITY DEFINER and executable by pgkick_producer: a producer's temporary table `jobs`,\n-- with a trigger of its own, was the table they read and wrote, and its trigger ran as\n-- their owner, the role that migrated (any SQL at its rights). The dependency triggers'\n-- functions (0017, 0019) were open the same way to a worker or an operator. The functions\n-- run with their caller's rights (the claim, the completions) get the same path: one rule\n-- for every function of the schema, and a temporary table named like pgkick's cannot\n-- misdirect a worker's own claim either. (job_ordered_at_set, 0011, has no path and gets\n-- none: a trigger run with its caller's rights that names no table; a SET clause would cost\n-- every grouped insert a save and restore of the setting.)\nDO $path$\nDECLARE\n  fn regprocedure;\nBEGIN\n  FOR fn IN\n    SELECT p.oid::regprocedure\n    FROM pg_proc p\n    WHERE p.pronamespace = current_schema()::regnamespace\n      AND EXISTS (SELECT FROM unnest(p.proconfig) AS c WHERE c LIKE 'search\\_path=%')\n      AND NOT EXISTS (SELECT FROM pg_depend d\n                      WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid\n                        AND d.deptype = 'e')\n  LOOP\n    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());\n  END LOOP;\nEND\n$path$;"),
    (26, 'job_functions_own_rows', """\
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
$flow$;"""),
    (27, 'queue_kick_functions', """\
-- 0027_queue_kick_functions: a kick is reserved and released through two functions run with their owner's rights (SECURITY DEFINER: queue_kick_reserve, queue_kick_release), and a producer keeps no right on queue_watchers itself: it can no longer write a watcher row, make a reservation longer than an hour, date one by a clock of its own, or delete a worker's announcement. Same answers for pgkick's own calls.
-- Why (the roles' review of 2026-12-05, left open by 0026): a producer reserved its kicks by
-- writing queue_watchers itself (insert, update, delete), so it could write any row there:
-- a fake worker or a pending kick with any `until` (0026's readers ignore rows more than two
-- hours ahead, so such a row held a queue's kicks back for up to two hours), delete a
-- lingering worker's announcement (spare kicks), or name the statement's clock. Through the
-- functions it writes only what a reservation writes: a 'kick' row for a queue nobody
-- watches, until now() plus its pending time, clamped to an hour (PGKICK_KICK_PENDING_MS's
-- own maximum); its clock is taken only from a session that is the functions' owner or one
-- of its members (tests inject one), as job_insert_flow's (0026); and a release deletes only
-- the 'kick' row. Workers keep their rights on the table: they announce, listen and
-- withdraw there, and reserve through the same function.
CREATE FUNCTION queue_kick_reserve(kick_queues text[], pending interval, reserve_now timestamptz)
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT
AS $reserve$
DECLARE
  at timestamptz := CASE WHEN reserve_now IS NOT NULL
                              AND pg_has_role(session_user, current_user, 'MEMBER')
                         THEN reserve_now ELSE now() END;
  lapse interval := least(greatest(pending, interval '0'), interval '1 hour');
BEGIN
  -- A reservation lost in a crash costs one spare kick: its commit need not wait for the disk.
  PERFORM set_config('synchronous_commit', 'off', true);
  RETURN QUERY
  WITH wanted AS (
    SELECT DISTINCT q AS queue FROM unnest(kick_queues) AS q
    WHERE NOT EXISTS (
      -- A watcher counts until its `until`, never more than two hours ahead: no announcement
      -- (PGKICK_WATCH_SECONDS) or reservation reaches past one hour from its writer's now()
      -- (another transaction's now() may be earlier: the second hour is the margin), so a
      -- row past it is none of pgkick's and holds nothing.
      SELECT 1 FROM queue_watchers l
      WHERE l.queue = q AND l.until > at AND l.until <= at + interval '2 hours'
    )
    AND NOT EXISTS (SELECT 1 FROM queue_limits p WHERE p.queue = q AND p.paused)
  ), reserved AS (
    INSERT INTO queue_watchers AS w (queue, watcher, until)
    SELECT wanted.queue, 'kick', at + lapse FROM wanted
    ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until
      WHERE w.until <= at OR w.until > at + interval '2 hours'
    RETURNING w.queue
  ), woken AS (
    -- Only a worker that lingers has listening_until ahead (pgkick.worker.linger): a busy
    -- worker, a pending kick, or an idle queue gets no NOTIFY (delivered at the commit).
    SELECT count(pg_notify(l.channel, '')) AS n FROM queue_watchers l
    WHERE l.queue = ANY (kick_queues)
      AND l.listening_until > at
      AND l.until > at AND l.until <= at + interval '2 hours'
  )
  -- UNION ALL runs both branches to the end: the NOTIFYs are sent whether or not a kick was
  -- reserved (the woken branch itself returns no row).
  SELECT r.queue FROM reserved r
  UNION ALL
  SELECT NULL FROM woken WHERE woken.n < 0;
END
$reserve$;

CREATE FUNCTION queue_kick_release(kick_queue text)
RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT
AS $release$
  DELETE FROM queue_watchers WHERE queue = kick_queue AND watcher = 'kick';
$release$;

REVOKE ALL ON FUNCTION queue_kick_reserve(text[], interval, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION queue_kick_release(text) FROM PUBLIC;

-- The roles that reserved kicks by writing the table (role_setup's pgkick_producer and
-- pgkick_worker, or an install's own) now call the functions; of them, a role that may not
-- claim (update a job's status) keeps no right on the table.
DO $grant$
DECLARE
  grantee oid;
  role_name text;
  claims boolean;
BEGIN
  FOR grantee IN
    SELECT DISTINCT a.grantee
    FROM pg_catalog.pg_class AS t, LATERAL aclexplode(t.relacl) AS a
    WHERE t.oid = 'queue_watchers'::regclass AND a.privilege_type = 'INSERT'
      AND a.grantee <> t.relowner
  LOOP
    role_name := CASE WHEN grantee = 0 THEN 'PUBLIC' ELSE grantee::regrole::text END;
    EXECUTE format('GRANT EXECUTE ON FUNCTION queue_kick_reserve(text[], interval, timestamptz),'
                   ' queue_kick_release(text) TO %s', role_name);
    claims := CASE WHEN grantee = 0
                   THEN has_column_privilege('public', 'jobs', 'status', 'UPDATE')
                   ELSE has_column_privilege(grantee, 'jobs'::regclass, 'status', 'UPDATE') END;
    IF NOT claims THEN
      EXECUTE format('REVOKE ALL ON queue_watchers FROM %s', role_name);
    END IF;
  END LOOP;
END
$grant$;"""),
    (28, 'job_await_not_public', """\
-- 0028_job_await_not_public: job_await (SECURITY DEFINER since 0017) may be called by its owner and the roles that may insert jobs (they link what they enqueue to its parents, after=), not by PUBLIC, on every install: only `pgkick migrate --roles` (role_setup) took PUBLIC's right away before.
-- Why (the roles' review of 2026-12-05): PostgreSQL lets PUBLIC execute a new function, and
-- 0017 left job_await so. Where --roles never ran, any role that may use the schema (one
-- granted USAGE for reports, say) could call it with its owner's rights: flag any job as a
-- parent (its row written and locked until the caller's transaction ends) and learn from
-- the answer whether that job exists, finished or failed, though it may insert no job to
-- link. job_insert_flow's PUBLIC right was taken away by 0015 itself; the claim's and the
-- completions' functions run with their caller's rights (a caller without the tables'
-- rights gets nothing from them); trigger functions cannot be called directly.
REVOKE ALL ON FUNCTION job_await(bigint[], bigint[], text[], timestamptz) FROM PUBLIC;

-- Every role that may insert a job's payload (role_setup's pgkick_producer and pgkick_worker,
-- or an install's own roles) keeps calling it.
DO $grant$
DECLARE
  role_name text;
BEGIN
  FOR role_name IN
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'payload' AND a.privilege_type = 'INSERT'
    UNION
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_class AS t, LATERAL aclexplode(t.relacl) AS a
    WHERE t.oid = 'jobs'::regclass AND a.privilege_type = 'INSERT' AND a.grantee <> t.relowner
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION job_await(bigint[], bigint[], text[], timestamptz)'
                   ' TO %s', role_name);
  END LOOP;
END
$grant$;"""),
    (29, 'job_claim_timed_after_lock', """\
-- 0029_job_claim_timed_after_lock: a claim of a queue with a rate times its starts by the clock once it holds the queue's claim lock, not by its transaction's start, and each job it takes is claimed at that same instant (claimed_at); no sliding window of the jobs' real start times holds more than the rate. job_claim: 0014's, same signature, return shape and grants; the plain branch untouched.
-- Why (a review of the flow control, 2026-12-05): `at` was now(), the transaction's start,
-- fixed before the claim lock. A claim that waited for the lock (held by a slower claim, or
-- a claim in a caller's open transaction, or after the completion of job_complete_and_claim)
-- recorded its start at its transaction's start, up to the wait earlier than the job really
-- started (claimed_at, the clock after the wait), and counted its window from there: the
-- next claim, a period after the recorded start, was admitted less than a period after the
-- real one. Measured on the real server: rate 1 per 2 s, two starts of one key 0.57 s apart
-- (claimed_at) behind a 1.5 s lock wait; six draining workers at 2 per second, 157 windows
-- of one second over the rate. Now the starts' time is read after the lock: every claim that
-- recorded a start before committed before this one took the lock, so the times are in real
-- order, and the job's claimed_at is the recorded start itself. A caller's clock (claim_now,
-- the tests') is kept as it was. The other locked claims (groups, a running limit) take the
-- same later `at` for the due time and the lease: a job due while the claim waited is due.
CREATE OR REPLACE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                                     claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $claim$
#variable_conflict use_column
DECLARE
  at timestamptz := coalesce(claim_now, now());
  lim record;
  free int;
  fair_ids bigint[];
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
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
    ORDER BY c.priority DESC, c.run_at, c.id;
    RETURN;
  END IF;

  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('pgkick.claim'), hashtext(claim_queue));
  -- From here the claim is timed by the clock, not by its transaction's start (0029): the
  -- lock may have been waited for, and a rate's starts are recorded at `at`.
  IF claim_now IS NULL THEN
    at := clock_timestamp();
  END IF;
  SELECT l.max_running, l.rate_limit, l.rate_period, l.concurrency, l.paused INTO lim
  FROM queue_limits l WHERE l.queue = claim_queue;
  IF lim.paused THEN
    RETURN;  -- a paused queue: nothing is claimed until `pgkick resume`
  END IF;
  IF lim.rate_limit IS NOT NULL OR lim.concurrency IS NOT NULL THEN
    free := claim_batch;
    IF lim.max_running IS NOT NULL THEN
      free := least(free, lim.max_running - (SELECT count(*) FROM jobs r
                                             WHERE r.queue = claim_queue
                                               AND r.status = 'running')::int);
    END IF;
    IF free <= 0 THEN
      RETURN;
    END IF;
    fair_ids := job_claim_fair_ids(claim_queue, free, at, lim.rate_limit, lim.rate_period,
                                   coalesce(lim.concurrency, 1));
    RETURN QUERY
    WITH claimed AS (
      UPDATE jobs j
      SET status       = 'running',
          attempts     = j.attempts + 1,
          locked_until = at + claim_lease,
          claimed_at   = at  -- the instant its start is recorded at (job_claim_fair_ids)
      WHERE j.id = ANY (fair_ids)
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
    ORDER BY array_position(fair_ids, c.id);
    RETURN;
  END IF;
  RETURN QUERY
  WITH next AS (
    -- 0011's head rule (read it there): one running job a group, its head only.
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
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;"""),
    (30, 'job_insert_flow_timed_by_the_clock', """\
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
$flow$;"""),
    (31, 'job_keyless_queued_index', """\
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
$fair$;"""),
    (32, 'job_dependants_counted_again', """\
-- 0032_job_dependants_counted_again: a failed parent put back in the queue (a retry, or its own revival) is counted again by its 'run anyway' dependants still waiting, so its next finish releases them no earlier than their other parents. job_dependants_revive: 0019's, same trigger, plus that count.
-- Why (a review of the dependencies, 2026-12-05): a 'run anyway' dependant counts a parent's
-- failure as its finish (waiting_on - 1, 0017). Retried, the parent was unfinished again but
-- still counted off, and its next finish (done, or failed again) counted it off a second
-- time: a dependant of P (run anyway) and Q (fail) ran as soon as a retried P completed,
-- with Q never run, so Q's failure policy could never apply; one of P, Q1, Q2 dropped to
-- waiting on one parent with both Q's still queued. Now the retry adds the count back, under
-- the same locks as the revival's (the dependants' parents FOR SHARE, in id order, before
-- their rows), so a parent finishing meanwhile is counted once either way.
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
$revive$;"""),
    (33, 'job_dependants_revive_not_behind_a_newer_key', """\
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
$revive$;"""),
    (34, 'edited_migrations_reapplied', "-- 0034_edited_migrations_reapplied: an install migrated before 0015, 0017, 0022 or 0026 were edited in place gets what they make now: job_await as 0026 writes it (the first design's five-argument job_await dropped), job_dependants_settle and its trigger as 0017 writes them (job_dependencies without the attempt column), job_ready_fair_count as 0022 writes it, and the live-key unique index over waiting jobs as 0015 makes it. An install that has them already is left as it is.\n-- Why (a review of migrations and upgrades, 2026-12-05): the ledger records versions, not\n-- texts, so a database that applied a migration never runs it again, whatever its file says\n-- later. Those four were edited on main after databases could have applied them, and an\n-- install upgraded from such a state reported the latest version and kept: a job_await\n-- without 0026's created_at check (a producer could make another app's debounced job its\n-- child and hold it), a five-argument job_await with none of 0024's and 0026's checks, still\n-- SECURITY DEFINER and granted to pgkick_producer, the first design's trigger (fired when a\n-- running parent went back to the queue) and attempt column, job_ready_fair_count counting\n-- a rate's window row by row, and a unique index that let a waiting job take a key a queued\n-- or running one held. tests/test_schema_upgrade.py now refuses an edit of a released\n-- migration (tests/migration_hashes.txt) and checks that such an install, upgraded, is a\n-- fresh one; a change is a new migration, like this one.\n-- The functions are copies of the newest definition before this migration (a test compares\n-- them on a fresh install): CREATE OR REPLACE keeps their owner and grants, and rewrites a\n-- current one to the same text. The trigger is made again (catalog only). The index is\n-- rebuilt only where it does not count waiting jobs, the one shape it ever had otherwise:\n-- a rebuild reads the whole table. Before that, a key two live jobs hold (a waiting job\n-- that took a key the old index did not guard) stops the migration, in words, with nothing\n-- changed: which of the two should keep it is the operator's choice.\n\nCREATE OR REPLACE FUNCTION job_await(child_ids bigint[], parent_ids bigint[], policies text[],\n                          await_now timestamptz)\nRETURNS TABLE (id bigint)\nLANGUAGE plpgsql VOLATILE SECURITY DEFINER\nSET search_path FROM CURRENT\nAS $await$\n#variable_conflict use_column\nDECLARE\n  missing bigint;\n  bad_policy text;\n  at timestamptz := coalesce(await_now, now());\n  p_ids bigint[];\n  p_status text[];\n  p_errors text[];\n  foreign_child bigint;\n  cur bigint := pg_current_xact_id()::text::bigint;\nBEGIN\n  -- Only jobs this transaction inserted may be made to wait: the function runs with its\n  -- owner's rights, and a producer could otherwise fail or hold any queued job. A child row\n  -- visible here whose inserting transaction is still in progress is this transaction's own\n  -- (or one of its savepoints'): another's uncommitted insert is invisible. xmin is 32 bits;\n  -- its full id is the one nearest this transaction's (the caller has just inserted it).\n  -- xmin is the last writer, not the inserter: this function's flag on a parent, or a\n  -- debounce's update of a key's job, makes that row this transaction's too (0026). So a\n  -- child must also have been made at this transaction's start (created_at, its default,\n  -- now(): no insert pgkick sends sets it, and debounced jobs take no parents; an update\n  -- leaves it) and not be flagged as a parent already (pgkick links a job in the call that\n  -- follows its insert, before any later job can name it: a batch's pairs go in one call,\n  -- checked before flagging).\n  SELECT j.id INTO foreign_child\n  FROM jobs j,\n       LATERAL (SELECT ((cur >> 32) << 32) | j.xmin::text::bigint AS near) AS x,\n       LATERAL (SELECT CASE WHEN x.near - cur > 2147483648 THEN x.near - 4294967296\n                            WHEN cur - x.near > 2147483648 THEN x.near + 4294967296\n                            ELSE x.near END AS full_id) AS f\n  WHERE j.id = ANY (child_ids)\n    AND (pg_xact_status(f.full_id::text::xid8) IS DISTINCT FROM 'in progress'\n         OR j.created_at <> now() OR j.has_dependants)\n  LIMIT 1;\n  IF FOUND THEN\n    RAISE EXCEPTION 'pgkick: job % was not enqueued in this transaction', foreign_child\n      USING HINT = 'a job is linked to its parents (after=) in the transaction that enqueues it',\n            ERRCODE = '42501';\n  END IF;\n  SELECT p INTO bad_policy FROM unnest(policies) AS p\n  WHERE p IS NULL OR p NOT IN ('fail', 'cancel', 'run anyway') LIMIT 1;\n  IF FOUND THEN\n    RAISE EXCEPTION 'pgkick: unknown dependency policy %', coalesce(bad_policy, 'NULL')\n      USING HINT = 'use fail, cancel or run anyway', ERRCODE = '22023';\n  END IF;\n  -- Locked in id order (as a batch's complete mostly goes), then flagged.\n  WITH locked AS (\n    SELECT l.id FROM jobs l WHERE l.id = ANY (parent_ids) ORDER BY l.id FOR UPDATE\n  ), flagged AS (\n    UPDATE jobs j SET has_dependants = true\n    FROM locked WHERE j.id = locked.id\n    RETURNING j.id, j.status, j.last_error\n  )\n  SELECT array_agg(f.id), array_agg(f.status), array_agg(f.last_error)\n  INTO p_ids, p_status, p_errors\n  FROM flagged f;\n  SELECT p INTO missing FROM unnest(parent_ids) AS p\n  WHERE p_ids IS NULL OR p <> ALL (p_ids) LIMIT 1;\n  IF FOUND THEN\n    RAISE EXCEPTION 'pgkick: parent job % does not exist in schema %', missing, current_schema()\n      USING HINT = 'a job can wait only for jobs enqueued before it', ERRCODE = '23503';\n  END IF;\n  INSERT INTO job_dependencies (child_id, parent_id, policy)\n  SELECT c, p, pol FROM unnest(child_ids, parent_ids, policies) AS x(c, p, pol)\n  ON CONFLICT (parent_id, child_id) DO NOTHING;\n  -- A parent already failed under 'fail' or 'cancel': the child ends now, with the reason.\n  UPDATE jobs j\n  SET status = 'failed', finished_at = at,\n      last_error = left(CASE WHEN x.pol = 'cancel' THEN 'cancelled: ' ELSE '' END\n                        || format('parent job %s failed: %s', f.id, f.last_error), 2000)\n  FROM unnest(child_ids, parent_ids, policies) AS x(c, p, pol)\n  JOIN unnest(p_ids, p_status, p_errors) AS f(id, status, last_error) ON f.id = x.p\n  WHERE j.id = x.c AND j.status = 'queued' AND f.status = 'failed' AND x.pol <> 'run anyway';\n  RETURN QUERY\n  WITH pending AS (\n    SELECT x.c, count(*)::int AS n\n    FROM unnest(child_ids, parent_ids) AS x(c, p)\n    JOIN unnest(p_ids, p_status) AS f(id, status) ON f.id = x.p\n    WHERE f.status NOT IN ('done', 'failed')\n    GROUP BY x.c\n  )\n  UPDATE jobs j SET status = 'waiting', waiting_on = pending.n\n  FROM pending WHERE j.id = pending.c AND j.status = 'queued'\n  RETURNING j.id;\nEND\n$await$;\n\n-- 0028's right: only its owner and the roles granted it (role_setup) may call it.\nREVOKE ALL ON FUNCTION job_await(bigint[], bigint[], text[], timestamptz) FROM PUBLIC;\nDROP FUNCTION IF EXISTS job_await(bigint[], bigint[], text[], int[], timestamptz);\n\nCREATE OR REPLACE FUNCTION job_dependants_settle() RETURNS trigger\nLANGUAGE plpgsql SECURITY DEFINER\nSET search_path FROM CURRENT\nAS $settle$\nDECLARE\n  released text;\nBEGIN\n  IF NEW.status = 'failed' THEN\n    UPDATE jobs c\n    SET status = 'failed', waiting_on = 0, finished_at = now(),\n        last_error = left(CASE WHEN d.policy = 'cancel' THEN 'cancelled: ' ELSE '' END\n                          || format('parent job %s failed: %s', NEW.id, NEW.last_error), 2000)\n    FROM job_dependencies d\n    WHERE d.parent_id = NEW.id AND d.policy <> 'run anyway' AND c.id = d.child_id\n      AND c.status = 'waiting';\n  END IF;\n  WITH counted AS (\n    UPDATE jobs c\n    SET waiting_on = c.waiting_on - 1,\n        status = CASE WHEN c.waiting_on = 1 THEN 'queued' ELSE 'waiting' END\n    FROM job_dependencies d\n    WHERE d.parent_id = NEW.id AND c.id = d.child_id AND c.status = 'waiting'\n      AND (NEW.status = 'done' OR d.policy = 'run anyway')\n    RETURNING c.queue, c.status\n  )\n  SELECT string_agg(DISTINCT queue, E'\\n') INTO released FROM counted WHERE status = 'queued';\n  IF released IS NOT NULL THEN\n    PERFORM set_config('pgkick.released_queues',\n                       concat_ws(E'\\n', nullif(current_setting('pgkick.released_queues', true), ''),\n                                 released), true);\n  END IF;\n  RETURN NULL;\nEND\n$settle$;\n\nDROP TRIGGER jobs_dependants_settle ON jobs;\nCREATE TRIGGER jobs_dependants_settle AFTER UPDATE OF status ON jobs\nFOR EACH ROW WHEN (NEW.has_dependants AND OLD.status IS DISTINCT FROM NEW.status\n                   AND NEW.status IN ('done', 'failed'))\nEXECUTE FUNCTION job_dependants_settle();\nALTER TABLE job_dependencies DROP COLUMN IF EXISTS attempt;\n\nCREATE OR REPLACE FUNCTION job_ready_fair_count(ready_queue text, at timestamptz, up_to int)\nRETURNS bigint\nLANGUAGE plpgsql STABLE\nSET search_path FROM CURRENT\nSET plan_cache_mode = force_generic_plan\nSET enable_seqscan = off  -- as job_claim_fair_ids: job_starts through its index at any size\nAS $ready$\n#variable_conflict use_column\nDECLARE\n  lim record;\n  unkeyed bigint;\nBEGIN\n  SELECT l.rate_limit, l.rate_period, l.concurrency, l.paused INTO lim\n  FROM queue_limits l WHERE l.queue = ready_queue;\n  IF NOT FOUND OR lim.paused THEN\n    RETURN 0;\n  END IF;\n  unkeyed := (SELECT count(*) FROM (SELECT 1 FROM jobs j\n                                    WHERE j.queue = ready_queue AND j.status = 'queued'\n                                      AND j.group_key IS NULL AND j.rate_key IS NULL\n                                      AND j.run_at <= at\n                                    LIMIT up_to) u);\n  IF unkeyed > 0 AND lim.rate_limit IS NOT NULL\n     AND coalesce((SELECT s.seq FROM job_starts s\n                WHERE s.queue = ready_queue AND s.rate_key = ''\n                ORDER BY s.started_at DESC, s.seq DESC LIMIT 1)\n               - (SELECT s.seq FROM job_starts s\n                  WHERE s.queue = ready_queue AND s.rate_key = ''\n                    AND s.started_at > at - lim.rate_period\n                  ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0) >= lim.rate_limit\n  THEN\n    unkeyed := 0;  -- the queue's own bucket has no start left\n  END IF;\n  IF unkeyed >= up_to THEN\n    RETURN unkeyed;\n  END IF;\n  RETURN unkeyed + (\n    SELECT count(*) FROM (\n      WITH RECURSIVE keys (k) AS (  -- the queue's keys with queued jobs, one probe each\n        SELECT (SELECT min(coalesce(j.group_key, j.rate_key)) FROM jobs j\n                WHERE j.queue = ready_queue AND j.status = 'queued'\n                  AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL))\n        UNION ALL\n        SELECT (SELECT min(coalesce(j.group_key, j.rate_key)) FROM jobs j\n                WHERE j.queue = ready_queue AND j.status = 'queued'\n                  AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)\n                  AND coalesce(j.group_key, j.rate_key) > keys.k)\n        FROM keys WHERE keys.k IS NOT NULL\n      )\n      SELECT 1 FROM keys\n      WHERE keys.k IS NOT NULL\n        AND ((EXISTS (SELECT 1 FROM jobs j  -- a rate key's ungrouped jobs\n                      WHERE j.queue = ready_queue AND j.status = 'queued'\n                        AND (j.group_key IS NOT NULL OR j.rate_key IS NOT NULL)\n                        AND coalesce(j.group_key, j.rate_key) = keys.k\n                        AND j.group_key IS NULL AND j.run_at <= at)\n              AND (lim.rate_limit IS NULL\n                   OR coalesce((SELECT s.seq FROM job_starts s\n                              WHERE s.queue = ready_queue AND s.rate_key = keys.k\n                              ORDER BY s.started_at DESC, s.seq DESC LIMIT 1)\n                             - (SELECT s.seq FROM job_starts s\n                                WHERE s.queue = ready_queue AND s.rate_key = keys.k\n                                  AND s.started_at > at - lim.rate_period\n                                ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0) < lim.rate_limit))\n          OR EXISTS (  -- a group's first jobs its concurrency leaves room for\n               SELECT 1 FROM (\n                 SELECT h.run_at, h.rate_key FROM jobs h\n                 WHERE h.queue = ready_queue AND h.group_key = keys.k AND h.status = 'queued'\n                 ORDER BY -h.priority, h.ordered_at, h.id\n                 LIMIT greatest(coalesce(lim.concurrency, 1)\n                                - (SELECT count(*) FROM jobs r\n                                   WHERE r.queue = ready_queue AND r.group_key = keys.k\n                                     AND r.status = 'running'), 0)) h\n               WHERE h.run_at <= at\n                 AND (lim.rate_limit IS NULL\n                      OR coalesce((SELECT s.seq FROM job_starts s\n                                 WHERE s.queue = ready_queue AND s.rate_key = coalesce(h.rate_key, '')\n                                 ORDER BY s.started_at DESC, s.seq DESC LIMIT 1)\n                                - (SELECT s.seq FROM job_starts s\n                                   WHERE s.queue = ready_queue AND s.rate_key = coalesce(h.rate_key, '')\n                                     AND s.started_at > at - lim.rate_period\n                                   ORDER BY s.started_at, s.seq LIMIT 1) + 1, 0) < lim.rate_limit)))\n      LIMIT up_to - unkeyed) f);\nEND\n$ready$;\n\nDO $live_keys$\nDECLARE\n  taken record;\nBEGIN\n  IF pg_get_indexdef('jobs_unique_live_idx'::regclass) LIKE '%''waiting''%' THEN\n    RETURN;\n  END IF;\n  SELECT k.unique_key, k.ids, count(*) OVER () AS keys INTO taken\n  FROM (SELECT j.unique_key, string_agg(j.id::text, ', ' ORDER BY j.id) AS ids\n        FROM jobs j\n        WHERE j.unique_key IS NOT NULL AND j.status IN ('waiting', 'queued', 'running')\n        GROUP BY j.unique_key HAVING count(*) > 1) AS k\n  ORDER BY k.unique_key LIMIT 1;\n  IF FOUND THEN\n    RAISE EXCEPTION 'pgkick: unique key % is held by jobs % (and % other keys by more than one live job): the unique index of this install did not count waiting jobs, so a waiting job took a key another live job held. Nothing was changed: with the pgkick you run now, cancel all but one job of each such key (pgkick cancel ID ...), then run pgkick migrate again',\n      quote_literal(taken.unique_key), taken.ids, taken.keys - 1\n      USING ERRCODE = '23505';\n  END IF;\n  DROP INDEX jobs_unique_live_idx;\n  CREATE UNIQUE INDEX jobs_unique_live_idx ON jobs (unique_key)\n    WHERE unique_key IS NOT NULL AND status IN ('waiting', 'queued', 'running');\nEND\n$live_keys$;"),
    (35, 'job_lapsed', """\
-- 0035_job_lapsed: jobs.lapsed, true while a job's previous attempt ended with its lease running out (its worker vanished: SIGKILL, OOM, a segfault, Lambda's timeout), so it may be the job that kills its worker; the claim returns it (job_claim and job_complete_and_claim recreated with the new return shape, their plans and grants kept), a worker runs such suspects last and marks each started (job_lapsed_start) just before it runs, and the reaper gives back the attempt of a suspect that never started.
-- Why (a review of the lease core, 2026-12-06): the claim counts an attempt for every job of
-- its batch, and the reaper could not tell a job that ran from one that never started. A
-- job that killed its worker took an attempt from each job claimed with it, every time; the
-- reaped batch kept its order, so the same poison job was claimed first with the same
-- batch-mates: poison first in a batch of 5 (max_attempts 3), three kills, and its 4
-- batch-mates ended `failed`, `lease expired (attempt 3 of 3)`, never started once.
-- Now a batch-mate loses at most the first attempt (when nothing was known yet): after it,
-- it is a suspect; a suspect not marked started when its lease lapses again is given back
-- its attempt, and a fresh job claimed with suspects runs, and is completed, before them.
-- A poison job is marked started each time it kills its worker, so it is charged each time.
-- Given back by raising max_attempts by one, not by taking one off attempts (`pgkick retry`'s
-- rule): attempts is the fencing token, and the worker whose lease lapsed may be alive
-- (frozen, its heartbeat cut off); given `attempts - 1`, the next claim would hand out the
-- token it still holds, and its start mark and completion would land on the new owner's row.
-- Where lapsed is cleared: by the start mark alone (and by an operator's retry, a fresh
-- start). Every outcome a worker records for a suspect (complete, fail, snooze, continue, a
-- cancel of a running job) comes after its mark, and a fresh job's flag is false already,
-- so the hot path writes nothing more: the claim cannot clear it (the reaper must read it
-- from the attempt that lapsed), and an outcome's statement would carry one more column
-- for every job to clear a flag almost never set. A suspect given back unstarted at the
-- worker's reserve keeps it: it never ran. A column with a constant default is catalog
-- only (PostgreSQL 11+): no table rewrite.
ALTER TABLE jobs ADD COLUMN lapsed boolean NOT NULL DEFAULT false;

-- A function's return shape cannot be changed in place and a dropped function loses its
-- grants: as in 0012, the grants an operator gave other roles are kept and given again
-- (pgkick's own roles get theirs from role_setup, which `migrate` runs again). A role that
-- may write a job's attempts (a worker's, to fence; a rescue reaps as the worker) may write
-- the new flag and the attempts a give-back raises.
CREATE TEMPORARY TABLE pgkick_0035_grants ON COMMIT DROP AS
SELECT p.oid::regprocedure::text AS function_name, a.grantee
FROM pg_catalog.pg_proc AS p,
     LATERAL aclexplode(p.proacl) AS a
WHERE p.pronamespace = current_schema()::regnamespace
  AND p.proname IN ('job_claim', 'job_complete_and_claim')
  AND p.proacl IS NOT NULL
  AND a.privilege_type = 'EXECUTE';

DO $grant$
DECLARE
  role_oid oid;
BEGIN
  FOR role_oid IN
    SELECT DISTINCT a.grantee
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'attempts'
      AND a.privilege_type = 'UPDATE'
  LOOP
    EXECUTE format('GRANT UPDATE (lapsed, max_attempts) ON jobs TO %s',
                   CASE WHEN role_oid = 0 THEN 'PUBLIC' ELSE role_oid::regrole::text END);
  END LOOP;
END
$grant$;

-- job_complete_and_claim returns job_claim's rows: both go, and come back with the new shape.
DROP FUNCTION job_complete_and_claim(bigint[], int[], text[], text, int, interval, timestamptz);
DROP FUNCTION job_claim(text, int, interval, timestamptz);

-- The claim of 0029, unchanged but for the column it returns (its branches and plan choices
-- are 0007's, 0011's, 0014's and 0029's: read them there). It writes no flag.
CREATE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                                     claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz, lapsed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $claim$
#variable_conflict use_column
DECLARE
  at timestamptz := coalesce(claim_now, now());
  lim record;
  free int;
  fair_ids bigint[];
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
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed
         FROM claimed c
    ORDER BY c.priority DESC, c.run_at, c.id;
    RETURN;
  END IF;

  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('pgkick.claim'), hashtext(claim_queue));
  -- From here the claim is timed by the clock, not by its transaction's start (0029): the
  -- lock may have been waited for, and a rate's starts are recorded at `at`.
  IF claim_now IS NULL THEN
    at := clock_timestamp();
  END IF;
  SELECT l.max_running, l.rate_limit, l.rate_period, l.concurrency, l.paused INTO lim
  FROM queue_limits l WHERE l.queue = claim_queue;
  IF lim.paused THEN
    RETURN;  -- a paused queue: nothing is claimed until `pgkick resume`
  END IF;
  IF lim.rate_limit IS NOT NULL OR lim.concurrency IS NOT NULL THEN
    free := claim_batch;
    IF lim.max_running IS NOT NULL THEN
      free := least(free, lim.max_running - (SELECT count(*) FROM jobs r
                                             WHERE r.queue = claim_queue
                                               AND r.status = 'running')::int);
    END IF;
    IF free <= 0 THEN
      RETURN;
    END IF;
    fair_ids := job_claim_fair_ids(claim_queue, free, at, lim.rate_limit, lim.rate_period,
                                   coalesce(lim.concurrency, 1));
    RETURN QUERY
    WITH claimed AS (
      UPDATE jobs j
      SET status       = 'running',
          attempts     = j.attempts + 1,
          locked_until = at + claim_lease,
          claimed_at   = at  -- the instant its start is recorded at (job_claim_fair_ids)
      WHERE j.id = ANY (fair_ids)
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed
         FROM claimed c
    ORDER BY array_position(fair_ids, c.id);
    RETURN;
  END IF;
  RETURN QUERY
  WITH next AS (
    -- 0011's head rule (read it there): one running job a group, its head only.
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
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed
         FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;

-- The round trip of 0012, unchanged but for the column it returns.
CREATE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],
                                       done_results text[], claim_queue text,
                                       claim_batch int, claim_lease interval,
                                       claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz, lapsed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $round$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int,
         NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
         NULL::boolean
  FROM job_complete(done_ids, done_attempts, done_results, claim_now) AS done;
  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);
END
$round$;

-- The grants the old functions had (none on a fresh install: role_setup gives them).
DO $regrant$
DECLARE
  kept record;
BEGIN
  FOR kept IN SELECT DISTINCT function_name FROM pgkick_0035_grants LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', kept.function_name);
  END LOOP;
  FOR kept IN SELECT * FROM pgkick_0035_grants LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', kept.function_name,
                   CASE WHEN kept.grantee = 0 THEN 'PUBLIC' ELSE kept.grantee::regrole::text END);
  END LOOP;
END
$regrant$;"""),
    (36, 'advisory_locks_per_schema', """\
-- 0036_advisory_locks_per_schema: the advisory lock keys of the claim (job_claim, a queue with a limit or groups) and of debounce and throttle (job_insert_flow) name the install's schema, so two installs in one database never wait on each other's locks; the install in schema pgkick keeps its keys. Both functions: their latest bodies (0035's, 0030's), same signature, answers and grants, but for the key.
-- Why (a review of several installs in one database, 2026-12-06): advisory locks are the
-- database's, not a schema's. The keys named the queue (`pgkick.claim`, the queue) or the
-- unique key (`pgkick.flow:` and the key) alone, so an app transaction of install `a` holding
-- a debounced key stalled install `b`'s debounce of the same key (another app's) until it
-- ended, and each install's claims of a limited queue waited on the other's claims of its
-- namesake. The key is the schema's for any install but `pgkick` (the default, and the only
-- one of most databases): there it is unchanged, so nothing crosses over while it migrates.
-- Elsewhere, a claim already running when this migration commits holds the old key while the
-- next takes the new one: once, for that instant, a limit may be passed by one batch.
-- CREATE OR REPLACE keeps each function's owner and grants; each says again its SECURITY
-- DEFINER (job_insert_flow) and its search_path (FROM CURRENT: this migration's, as 0025's).
CREATE OR REPLACE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,
                                     claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,
               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,
               claimed_at timestamptz, lapsed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $claim$
#variable_conflict use_column
DECLARE
  at timestamptz := coalesce(claim_now, now());
  lim record;
  free int;
  fair_ids bigint[];
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
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed
         FROM claimed c
    ORDER BY c.priority DESC, c.run_at, c.id;
    RETURN;
  END IF;

  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',
      current_setting('transaction_isolation')
      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';
  END IF;
  -- The key names the schema (0036): another install's claim of a queue so named is
  -- none of this one's.
  PERFORM pg_advisory_xact_lock(
    hashtext(CASE current_schema() WHEN 'pgkick' THEN 'pgkick.claim'
             ELSE 'pgkick.claim@' || current_schema() END),
    hashtext(claim_queue));
  -- From here the claim is timed by the clock, not by its transaction's start (0029): the
  -- lock may have been waited for, and a rate's starts are recorded at `at`.
  IF claim_now IS NULL THEN
    at := clock_timestamp();
  END IF;
  SELECT l.max_running, l.rate_limit, l.rate_period, l.concurrency, l.paused INTO lim
  FROM queue_limits l WHERE l.queue = claim_queue;
  IF lim.paused THEN
    RETURN;  -- a paused queue: nothing is claimed until `pgkick resume`
  END IF;
  IF lim.rate_limit IS NOT NULL OR lim.concurrency IS NOT NULL THEN
    free := claim_batch;
    IF lim.max_running IS NOT NULL THEN
      free := least(free, lim.max_running - (SELECT count(*) FROM jobs r
                                             WHERE r.queue = claim_queue
                                               AND r.status = 'running')::int);
    END IF;
    IF free <= 0 THEN
      RETURN;
    END IF;
    fair_ids := job_claim_fair_ids(claim_queue, free, at, lim.rate_limit, lim.rate_period,
                                   coalesce(lim.concurrency, 1));
    RETURN QUERY
    WITH claimed AS (
      UPDATE jobs j
      SET status       = 'running',
          attempts     = j.attempts + 1,
          locked_until = at + claim_lease,
          claimed_at   = at  -- the instant its start is recorded at (job_claim_fair_ids)
      WHERE j.id = ANY (fair_ids)
      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed
    )
    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed
         FROM claimed c
    ORDER BY array_position(fair_ids, c.id);
    RETURN;
  END IF;
  RETURN QUERY
  WITH next AS (
    -- 0011's head rule (read it there): one running job a group, its head only.
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
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed
  )
  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,
         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed
         FROM claimed c
  ORDER BY c.priority DESC, c.run_at, c.id;
END
$claim$;

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
  -- The key names the schema (0036): another install's key so spelt is another key.
  PERFORM pg_advisory_xact_lock(hashtextextended(
    CASE current_schema() WHEN 'pgkick' THEN 'pgkick.flow:'
    ELSE 'pgkick.flow@' || current_schema() || ':' END || f_key, 0));
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
$flow$;"""),
    (37, 'job_continued_left_and_released_at', "-- 0037_job_continued_left_and_released_at: jobs.continued_left_ms, the time a job's invocation had left (less the worker's reserve) when it continued the job before any step ran (a stalled continuation): the stall guard lets a next step run whatever its estimate only on a claim with at least that much time left, so a job claimed late twice in a row continues again instead of overrunning its invocation; and jobs.released_at, when a dependant's last parent finished, written by job_dependants_settle (0034's) as it releases it and returned by the claim (job_claim and job_complete_and_claim recreated with the new return shape, their plans and grants kept), so a dependant's span measures its wait from its release, not from its enqueue.\n-- Why (note 61's leftovers): the stall guard knew only that the last continuation came\n-- before any step, not how late that claim was, so the next claim, late again, ran a\n-- 10-minute step with 3 minutes left (on Lambda: killed at its timeout, the attempt charged).\n-- NULL where nothing was recorded (a job never continued stalled, or stalled before this\n-- migration): the guard then lets the step run, as before. A nullable column with no default\n-- is catalog only: no table rewrite.\nALTER TABLE jobs ADD COLUMN continued_left_ms int;\n\n-- A dependant's due time (run_at) is its enqueue time: the span's wait_ms (due to claimed,\n-- pgkick.worker.job_span) counted its parents' wait and run as its own time in the queue.\n-- NULL for a job with no parents, or one released before this migration (the wait is then\n-- measured from due, as before). Written by the trigger's owner (SECURITY DEFINER): no\n-- grant; the worker reads it through the claim. The plain claim runs no more statements:\n-- it is one more column of the rows the claim returns (sent only to a worker that traces).\nALTER TABLE jobs ADD COLUMN released_at timestamptz;\n\n-- A role that may record a continuation (the worker's: UPDATE of continued_stalled) may\n-- record the time it had left (role_setup gives pgkick_worker its grant on a fresh install).\nDO $grant$\nDECLARE\n  role_oid oid;\nBEGIN\n  FOR role_oid IN\n    SELECT DISTINCT a.grantee\n    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a\n    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'continued_stalled'\n      AND a.privilege_type = 'UPDATE'\n  LOOP\n    EXECUTE format('GRANT UPDATE (continued_left_ms) ON jobs TO %s',\n                   CASE WHEN role_oid = 0 THEN 'PUBLIC' ELSE role_oid::regrole::text END);\n  END LOOP;\nEND\n$grant$;\n\n-- The release trigger's function: 0034's, but for the time it writes on the dependant it\n-- releases. CREATE OR REPLACE keeps its owner, its SECURITY DEFINER and its trigger.\nCREATE OR REPLACE FUNCTION job_dependants_settle() RETURNS trigger\nLANGUAGE plpgsql SECURITY DEFINER\nSET search_path FROM CURRENT\nAS $settle$\nDECLARE\n  released text;\nBEGIN\n  IF NEW.status = 'failed' THEN\n    UPDATE jobs c\n    SET status = 'failed', waiting_on = 0, finished_at = now(),\n        last_error = left(CASE WHEN d.policy = 'cancel' THEN 'cancelled: ' ELSE '' END\n                          || format('parent job %s failed: %s', NEW.id, NEW.last_error), 2000)\n    FROM job_dependencies d\n    WHERE d.parent_id = NEW.id AND d.policy <> 'run anyway' AND c.id = d.child_id\n      AND c.status = 'waiting';\n  END IF;\n  WITH counted AS (\n    UPDATE jobs c\n    SET waiting_on = c.waiting_on - 1,\n        status = CASE WHEN c.waiting_on = 1 THEN 'queued' ELSE 'waiting' END,\n        -- the moment the last parent finished, on the clock its finish was written with\n        released_at = CASE WHEN c.waiting_on = 1 THEN coalesce(NEW.finished_at, now())\n                           ELSE c.released_at END\n    FROM job_dependencies d\n    WHERE d.parent_id = NEW.id AND c.id = d.child_id AND c.status = 'waiting'\n      AND (NEW.status = 'done' OR d.policy = 'run anyway')\n    RETURNING c.queue, c.status\n  )\n  SELECT string_agg(DISTINCT queue, E'\\n') INTO released FROM counted WHERE status = 'queued';\n  IF released IS NOT NULL THEN\n    PERFORM set_config('pgkick.released_queues',\n                       concat_ws(E'\\n', nullif(current_setting('pgkick.released_queues', true), ''),\n                                 released), true);\n  END IF;\n  RETURN NULL;\nEND\n$settle$;\n\n-- A function's return shape cannot be changed in place and a dropped function loses its\n-- grants: as in 0035, the grants an operator gave other roles are kept and given again\n-- (pgkick's own roles get theirs from role_setup, which `migrate` runs again).\nCREATE TEMPORARY TABLE pgkick_0037_grants ON COMMIT DROP AS\nSELECT p.oid::regprocedure::text AS function_name, a.grantee\nFROM pg_catalog.pg_proc AS p,\n     LATERAL aclexplode(p.proacl) AS a\nWHERE p.pronamespace = current_schema()::regnamespace\n  AND p.proname IN ('job_claim', 'job_complete_and_claim')\n  AND p.proacl IS NOT NULL\n  AND a.privilege_type = 'EXECUTE';\n\n-- job_complete_and_claim returns job_claim's rows: both go, and come back with the new shape.\nDROP FUNCTION job_complete_and_claim(bigint[], int[], text[], text, int, interval, timestamptz);\nDROP FUNCTION job_claim(text, int, interval, timestamptz);\n\n-- The claim of 0036, unchanged but for the column it returns (its branches and plan choices\n-- are 0007's, 0011's, 0014's, 0029's and 0036's: read them there).\nCREATE FUNCTION job_claim(claim_queue text, claim_batch int, claim_lease interval,\n                                     claim_now timestamptz)\nRETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,\n               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,\n               claimed_at timestamptz, lapsed boolean, released_at timestamptz)\nLANGUAGE plpgsql VOLATILE\nSET search_path FROM CURRENT\nSET plan_cache_mode = force_generic_plan\nAS $claim$\n#variable_conflict use_column\nDECLARE\n  at timestamptz := coalesce(claim_now, now());\n  lim record;\n  free int;\n  fair_ids bigint[];\nBEGIN\n  IF NOT EXISTS (SELECT 1 FROM queue_limits l WHERE l.queue = claim_queue)\n     AND (SELECT min(g.group_key) FROM jobs g\n          WHERE g.queue = claim_queue AND g.group_key IS NOT NULL AND g.status = 'queued')\n         IS NULL\n     AND (SELECT min(g.group_key) FROM jobs g\n          WHERE g.queue = claim_queue AND g.group_key IS NOT NULL AND g.status = 'running')\n         IS NULL\n  THEN\n    RETURN QUERY\n    WITH next AS (\n      SELECT j.id FROM jobs j\n      WHERE j.queue = claim_queue AND j.status = 'queued' AND j.run_at <= at\n        AND j.group_key IS NULL\n      ORDER BY j.priority DESC, j.run_at\n      LIMIT claim_batch\n      FOR UPDATE SKIP LOCKED\n    ),\n    claimed AS (\n      UPDATE jobs j\n      SET status       = 'running',\n          attempts     = j.attempts + 1,\n          locked_until = at + claim_lease,\n          claimed_at   = coalesce(claim_now, clock_timestamp())\n      WHERE j.id = ANY (ARRAY (SELECT next.id FROM next))\n      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,\n              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed,\n              j.released_at\n    )\n    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,\n         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed,\n         c.released_at\n         FROM claimed c\n    ORDER BY c.priority DESC, c.run_at, c.id;\n    RETURN;\n  END IF;\n\n  IF current_setting('transaction_isolation') <> 'read committed' THEN\n    RAISE EXCEPTION 'pgkick: a queue with a limit or groups is claimed under READ COMMITTED only, not %',\n      current_setting('transaction_isolation')\n      USING HINT = 'default_transaction_isolation is set for this database or role: reset it for pgkick''s worker role';\n  END IF;\n  -- The key names the schema (0036): another install's claim of a queue so named is\n  -- none of this one's.\n  PERFORM pg_advisory_xact_lock(\n    hashtext(CASE current_schema() WHEN 'pgkick' THEN 'pgkick.claim'\n             ELSE 'pgkick.claim@' || current_schema() END),\n    hashtext(claim_queue));\n  -- From here the claim is timed by the clock, not by its transaction's start (0029): the\n  -- lock may have been waited for, and a rate's starts are recorded at `at`.\n  IF claim_now IS NULL THEN\n    at := clock_timestamp();\n  END IF;\n  SELECT l.max_running, l.rate_limit, l.rate_period, l.concurrency, l.paused INTO lim\n  FROM queue_limits l WHERE l.queue = claim_queue;\n  IF lim.paused THEN\n    RETURN;  -- a paused queue: nothing is claimed until `pgkick resume`\n  END IF;\n  IF lim.rate_limit IS NOT NULL OR lim.concurrency IS NOT NULL THEN\n    free := claim_batch;\n    IF lim.max_running IS NOT NULL THEN\n      free := least(free, lim.max_running - (SELECT count(*) FROM jobs r\n                                             WHERE r.queue = claim_queue\n                                               AND r.status = 'running')::int);\n    END IF;\n    IF free <= 0 THEN\n      RETURN;\n    END IF;\n    fair_ids := job_claim_fair_ids(claim_queue, free, at, lim.rate_limit, lim.rate_period,\n                                   coalesce(lim.concurrency, 1));\n    RETURN QUERY\n    WITH claimed AS (\n      UPDATE jobs j\n      SET status       = 'running',\n          attempts     = j.attempts + 1,\n          locked_until = at + claim_lease,\n          claimed_at   = at  -- the instant its start is recorded at (job_claim_fair_ids)\n      WHERE j.id = ANY (fair_ids)\n      RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,\n              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed,\n              j.released_at\n    )\n    SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,\n         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed,\n         c.released_at\n         FROM claimed c\n    ORDER BY array_position(fair_ids, c.id);\n    RETURN;\n  END IF;\n  RETURN QUERY\n  WITH next AS (\n    -- 0011's head rule (read it there): one running job a group, its head only.\n    SELECT j.id, j.priority, j.run_at FROM jobs j\n    WHERE j.queue = claim_queue AND j.status = 'queued' AND j.run_at <= at\n      AND (j.group_key IS NULL\n           OR (NOT EXISTS (SELECT 1 FROM jobs g\n                           WHERE g.queue = j.queue AND g.group_key = j.group_key\n                             AND g.group_key IS NOT NULL AND g.status = 'running')\n               AND NOT EXISTS (SELECT 1 FROM jobs g\n                               WHERE g.queue = j.queue AND g.group_key = j.group_key\n                                 AND g.group_key IS NOT NULL AND g.status = 'queued'\n                                 AND (-g.priority, g.ordered_at, g.id)\n                                     < (-j.priority, j.ordered_at, j.id))))\n    ORDER BY j.priority DESC, j.run_at\n    LIMIT claim_batch\n    FOR UPDATE SKIP LOCKED\n  ),\n  room AS (\n    SELECT CASE WHEN l.max_running IS NULL THEN claim_batch\n                ELSE l.max_running - (SELECT count(*) FROM jobs r\n                                      WHERE r.queue = claim_queue AND r.status = 'running')\n           END AS free\n    FROM (SELECT 1) AS one LEFT JOIN queue_limits l ON l.queue = claim_queue\n  ),\n  ranked AS (\n    SELECT next.id, row_number() OVER (ORDER BY next.priority DESC, next.run_at, next.id) AS n\n    FROM next\n  ),\n  claimed AS (\n    UPDATE jobs j\n    SET status       = 'running',\n        attempts     = j.attempts + 1,\n        locked_until = at + claim_lease,\n        claimed_at   = coalesce(claim_now, clock_timestamp())\n    WHERE j.id = ANY (ARRAY (SELECT ranked.id FROM ranked\n                             WHERE ranked.n <= (SELECT free FROM room)))\n    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,\n              j.traceparent, j.tracestate, j.created_at, j.claimed_at, j.lapsed,\n              j.released_at\n  )\n  SELECT c.id, c.queue, c.task, c.payload, c.attempts, c.max_attempts,\n         c.traceparent, c.tracestate, c.created_at, c.run_at, c.claimed_at, c.lapsed,\n         c.released_at\n         FROM claimed c\n  ORDER BY c.priority DESC, c.run_at, c.id;\nEND\n$claim$;\n\n-- The round trip of 0035, unchanged but for the column it returns.\nCREATE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],\n                                       done_results text[], claim_queue text,\n                                       claim_batch int, claim_lease interval,\n                                       claim_now timestamptz)\nRETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int,\n               traceparent text, tracestate text, enqueued_at timestamptz, run_at timestamptz,\n               claimed_at timestamptz, lapsed boolean, released_at timestamptz)\nLANGUAGE plpgsql VOLATILE\nSET search_path FROM CURRENT\nSET plan_cache_mode = force_generic_plan\nAS $round$\n#variable_conflict use_column\nBEGIN\n  RETURN QUERY\n  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int,\n         NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,\n         NULL::boolean, NULL::timestamptz\n  FROM job_complete(done_ids, done_attempts, done_results, claim_now) AS done;\n  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);\nEND\n$round$;\n\n-- The grants the old functions had (none on a fresh install: role_setup gives them).\nDO $regrant$\nDECLARE\n  kept record;\nBEGIN\n  FOR kept IN SELECT DISTINCT function_name FROM pgkick_0037_grants LOOP\n    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', kept.function_name);\n  END LOOP;\n  FOR kept IN SELECT * FROM pgkick_0037_grants LOOP\n    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', kept.function_name,\n                   CASE WHEN kept.grantee = 0 THEN 'PUBLIC' ELSE kept.grantee::regrole::text END);\n  END LOOP;\nEND\n$regrant$;"),
)
