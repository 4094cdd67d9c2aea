"""Every SQL statement pgkick runs: generated from sql/ by infra/bundle_sql.py.

Do not edit: change sql/ and regenerate. Each constant is the named file's text,
whose first line says what it does.
"""

from typing import Final, LiteralString

DATABASE_SCRATCH_STATE: Final = """\
-- database_scratch_state: Whether this database has a jobs table, whether pgkick bench or demo marked it as their own, and whether a peer queue's tables are here.
SELECT to_regclass('jobs') IS NOT NULL AS has_jobs_table,
       coalesce(obj_description(to_regclass('jobs'), 'pg_class'), '')
         = 'pgkick scratch: made for pgkick bench and demo, which may empty it' AS ours,
       to_regclass('pgqueuer') IS NOT NULL
         OR to_regclass('procrastinate_jobs') IS NOT NULL AS has_peer_tables;"""

JOB_CLAIM_NAIVE: Final = """\
-- job_claim_naive: The article's WRONG claim (no row lock on the choice), marking the job done; kept only to show the race.
UPDATE jobs
SET status = 'done', attempts = attempts + 1, finished_at = now()
WHERE id = (
  SELECT id FROM jobs
  WHERE status = 'queued'
  ORDER BY run_at
  LIMIT 1
)
RETURNING id, attempts;"""

JOB_COUNT_BY_STATUS: Final = """\
-- job_count_by_status: Counts jobs by status with the most attempts any took (the article's table).
SELECT status, count(*) AS count, max(attempts) AS max_attempts FROM jobs GROUP BY status ORDER BY status;"""

JOB_DONE_SPAN: Final = """\
-- job_done_span: How many jobs are done and the seconds from the first claim to the last finish (the pipelined ceiling's time: neither pgbench's connecting nor its rounds on an empty queue).
SELECT count(*) AS done,
       coalesce(extract(epoch FROM max(finished_at) - min(claimed_at)), 0)::float8 AS seconds
FROM jobs
WHERE status = 'done';"""

JOB_HISTORY_FILL: Final = """\
-- job_history_fill: Adds count finished jobs of history (done a day ago), to measure the claim on a long-lived table.
INSERT INTO jobs (queue, task, payload, status, run_at, attempts, finished_at, created_at)
SELECT 'default', 'noop', '{}', 'done', now() - interval '1 day', 1,
       now() - interval '1 day', now() - interval '1 day'
FROM generate_series(1, %(count)s);"""

JOB_LATENCY_ALL: Final = """\
-- job_latency_all: Each job's status, attempts and wait from commit to claim in ms (the kicks benchmark's check).
SELECT status, attempts,
       extract(epoch FROM claimed_at - created_at) * 1000 AS wait_ms
FROM jobs;"""

JOB_NOTIFY_LISTENERS: Final = """\
-- job_notify_listeners: Tells LISTENing workers that a queue has work (the article's trigger, sent by the producer in the comparison).
SELECT pg_notify('pgkick_jobs', %(queue)s);"""

JOB_TABLE_ANALYZE: Final = """\
-- job_table_analyze: Refreshes the planner's statistics of the jobs table after a bulk load.
ANALYZE jobs;"""

JOB_TABLE_ANY_ROW: Final = """\
-- job_table_any_row: Whether the jobs table holds any job at all (bench and demo refuse a database whose jobs are not theirs).
SELECT EXISTS (SELECT FROM jobs) AS any_job;"""

JOB_TABLE_MARK_SCRATCH: Final = """\
-- job_table_mark_scratch: Marks the jobs table as pgkick bench's and demo's own, so that they may empty it and use it again (never an app's queue).
COMMENT ON TABLE jobs IS 'pgkick scratch: made for pgkick bench and demo, which may empty it';"""

JOB_TRUNCATE_ALL: Final = """\
-- job_truncate_all: Empties the jobs table between benchmark items (benchmarks only: never on a real queue).
TRUNCATE jobs;"""

PGQUEUER_JOB_COUNT: Final = """\
-- pgqueuer_job_count: Counts the jobs still in pgqueuer's queue table, to check a peer's drain ran every job.
SELECT count(*) AS count FROM pgqueuer;"""

PROCRASTINATE_JOB_COUNT_BY_STATUS: Final = """\
-- procrastinate_job_count_by_status: Counts procrastinate's jobs by status, to check a peer's drain ran every job.
SELECT status::text, count(*) AS count FROM procrastinate_jobs GROUP BY status ORDER BY status;"""

PROCRASTINATE_JOB_RESET: Final = """\
-- procrastinate_job_reset: Empties procrastinate's jobs (and their events) between benchmark runs of that peer (benchmarks only).
TRUNCATE procrastinate_jobs CASCADE;"""

PROCRASTINATE_SCHEMA_EXISTS: Final = """\
-- procrastinate_schema_exists: Whether procrastinate's schema is installed in this database (the peer benchmark installs it once).
SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS installed;"""

QUEUE_WATCHERS_CLEAR: Final = """\
-- queue_watchers_clear: Forgets every worker announcement and pending kick between benchmark items (benchmarks only).
DELETE FROM queue_watchers;"""

SESSION_LISTEN: Final = """\
-- session_listen: Subscribes this session to job notifications (what LISTEN-based peers hold open).
LISTEN pgkick_jobs;"""

STATEMENT_CALL_TOTAL: Final = """\
-- statement_call_total: Statements run in this database so far (pg_stat_statements), leaving out this count itself: the idle query rate.
SELECT coalesce(sum(calls), 0)::bigint AS calls
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '-- statement_call_total:%%';"""

STATEMENT_STATS_INSTALL: Final = """\
-- statement_stats_install: Installs pg_stat_statements in this database when the server preloads it (for the idle query rate).
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"""

JOB_CANCEL_QUEUED: Final = """\
-- job_cancel_queued: Fails queued jobs (by ids, or by queue and task) with last_error 'cancelled by operator'; running jobs are left to finish.
UPDATE jobs
SET status      = 'failed',
    finished_at = coalesce(%(now)s::timestamptz, now()),
    last_error  = 'cancelled by operator'
WHERE status = 'queued'
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
RETURNING id, queue;"""

JOB_CLAIM: Final = """\
-- job_claim: Claims up to batch ready jobs of a queue under a lease, skipping rows other workers hold (FOR UPDATE SKIP LOCKED).
WITH next AS (
  SELECT id FROM jobs
  WHERE queue = %(queue)s AND status = 'queued'
    AND run_at <= coalesce(%(now)s::timestamptz, now())
  ORDER BY run_at
  LIMIT %(batch)s
  FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
SET status       = 'running',
    attempts     = j.attempts + 1,
    locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    claimed_at   = coalesce(%(now)s::timestamptz, clock_timestamp())
FROM next
WHERE j.id = next.id
RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts;"""

JOB_COMMITTED_AMONG: Final = """\
-- job_committed_among: Which of the given job ids exist (committed, not rolled back with a savepoint), with their queue and due time.
SELECT id, queue, run_at FROM jobs WHERE id = ANY(%(ids)s::bigint[]);"""

JOB_COMPLETE: Final = """\
-- job_complete: Marks one running job done, only while this attempt still holds it (fenced; 0 rows = lease lost).
UPDATE jobs
SET status = 'done', locked_until = NULL,
    finished_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;"""

JOB_COMPLETE_MANY: Final = """\
-- job_complete_many: Marks a batch of running jobs done in one statement, each fenced by its own attempt; returns the ids still held.
UPDATE jobs j
SET status = 'done', locked_until = NULL,
    finished_at = coalesce(%(now)s::timestamptz, now())
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempts)
WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
RETURNING j.id;"""

JOB_EXTEND: Final = """\
-- job_extend: Pushes a running job's lease forward, only while this attempt still holds it (fenced; 0 rows = stop working).
UPDATE jobs
SET locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING locked_until;"""

JOB_EXTEND_MANY: Final = """\
-- job_extend_many: Pushes the leases of a batch forward in one statement, each fenced by its own attempt; returns the ids still held.
UPDATE jobs j
SET locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempts)
WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
RETURNING j.id;"""

JOB_FAIL: Final = """\
-- job_fail: Records a failed attempt (fenced): queued again after backoff x 2^attempts (default 10 s, at most the cap, default 1 hour), or failed at max_attempts or when permanent.
UPDATE jobs
SET status       = CASE WHEN %(permanent)s::boolean OR attempts >= max_attempts
                        THEN 'failed' ELSE 'queued' END,
    run_at       = CASE WHEN %(permanent)s::boolean OR attempts >= max_attempts THEN run_at
                        ELSE coalesce(%(now)s::timestamptz, now())
                             + least(coalesce(%(backoff_cap)s::interval, interval '1 hour'),
                                     coalesce(%(backoff)s::interval, interval '10 seconds')
                                     * 2 ^ least(attempts, 20))
                   END,
    finished_at  = CASE WHEN %(permanent)s::boolean OR attempts >= max_attempts
                        THEN coalesce(%(now)s::timestamptz, now()) END,
    locked_until = NULL,
    last_error   = left(%(error)s, 2000)
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING id, queue, status, run_at;"""

JOB_GET_MANY: Final = """\
-- job_get_many: Reads jobs by id, for the CLI and the demo's report.
SELECT id, queue, task, status, attempts, max_attempts, run_at, locked_until, last_error,
       created_at, claimed_at, finished_at
FROM jobs
WHERE id = ANY(%(ids)s::bigint[])
ORDER BY id;"""

JOB_INSERT: Final = """\
-- job_insert: Inserts one queued job, due at run_at or after delay, and returns its id, queue and due time.
INSERT INTO jobs (queue, task, payload, run_at, max_attempts)
VALUES (%(queue)s, %(task)s, %(payload)s::jsonb,
        coalesce(%(run_at)s::timestamptz,
                 coalesce(%(now)s::timestamptz, now()) + %(delay)s::interval),
        %(max_attempts)s)
RETURNING id, queue, run_at;"""

JOB_INSERT_MANY: Final = """\
-- job_insert_many: Inserts many queued jobs in one round trip from parallel arrays (binary; delays in seconds), returning ids in input order.
INSERT INTO jobs (queue, task, payload, run_at, max_attempts)
SELECT q, t, p::jsonb,
       coalesce(r, coalesce(%(now)s::timestamptz, now()) + make_interval(secs => d)),
       m
FROM unnest(%(queues)b::text[], %(tasks)b::text[], %(payloads)b::text[],
            %(run_ats)b::timestamptz[], %(delays)b::float8[], %(max_attempts)b::int[])
     WITH ORDINALITY AS x(q, t, p, r, d, m, n)
ORDER BY n
RETURNING id, queue, run_at;"""

JOB_LEASE_LATEST_IN_QUEUE: Final = """\
-- job_lease_latest_in_queue: The latest lease expiry among a queue's running jobs (a rescue that finds leases not yet expired comes back then).
SELECT max(locked_until) FROM jobs WHERE queue = %(queue)s AND status = 'running';"""

JOB_LIST_QUEUED: Final = """\
-- job_list_queued: The queued jobs (optionally of one task and one queue), oldest first, with their payloads: what pgkick.testing's manual mode asserts on.
SELECT id, queue, task, payload, run_at
FROM jobs
WHERE status = 'queued'
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY id;"""

JOB_PURGE_FINISHED: Final = """\
-- job_purge_finished: Deletes up to batch done or failed jobs that finished more than retention ago; never queued or running ones.
DELETE FROM jobs
WHERE id IN (
  SELECT id FROM jobs
  WHERE status IN ('done', 'failed')
    AND finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
  LIMIT %(batch)s
);"""

JOB_READY_COUNT_BY_QUEUE: Final = """\
-- job_ready_count_by_queue: Counts the jobs ready to run now in each queue (which queues need a worker).
SELECT queue, count(*) AS ready
FROM jobs
WHERE status = 'queued' AND run_at <= coalesce(%(now)s::timestamptz, now())
GROUP BY queue
ORDER BY queue;"""

JOB_READY_EXISTS: Final = """\
-- job_ready_exists: Says whether a queue has a job ready to run now (a worker out of time decides whether to hand over).
SELECT EXISTS (
  SELECT 1 FROM jobs
  WHERE queue = %(queue)s AND status = 'queued'
    AND run_at <= coalesce(%(now)s::timestamptz, now())
);"""

JOB_REAP_EXPIRED: Final = """\
-- job_reap_expired: Re-queues running jobs whose lease expired (all queues, or the one a rescue names), or fails them at max_attempts with a last_error saying so.
UPDATE jobs
SET status       = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
    finished_at  = CASE WHEN attempts >= max_attempts
                        THEN coalesce(%(now)s::timestamptz, now()) END,
    locked_until = NULL,
    last_error   = format('lease expired (attempt %%s of %%s)', attempts, max_attempts)
WHERE status = 'running' AND locked_until < coalesce(%(now)s::timestamptz, now())
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
RETURNING id, queue, status, attempts;"""

JOB_RETRY_FAILED: Final = """\
-- job_retry_failed: Puts failed jobs (by ids, or by queue and task) back in the queue with more attempts, never more than 1000 in all (a job that used 1000 stays failed); attempts keep counting up, so fencing stays sound.
UPDATE jobs
SET status       = 'queued',
    run_at       = coalesce(%(now)s::timestamptz, now()),
    finished_at  = NULL,
    max_attempts = least(attempts + %(extra_attempts)s::int, 1000)
WHERE status = 'failed'
  AND attempts < 1000
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
RETURNING id, queue;"""

JOB_STATS_BY_QUEUE: Final = """\
-- job_stats_by_queue: Per queue: jobs by status, the oldest ready job's age, the next lease to expire, failures in the last day, and ready jobs waiting past stranded_after with no worker watching.
SELECT queue,
       count(*) FILTER (WHERE status = 'queued')  AS queued,
       count(*) FILTER (WHERE status = 'queued'
                          AND run_at <= coalesce(%(now)s::timestamptz, now())) AS ready,
       count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status = 'done')    AS done,
       count(*) FILTER (WHERE status = 'failed')  AS failed,
       count(*) FILTER (WHERE status = 'failed'
                          AND finished_at > coalesce(%(now)s::timestamptz, now()) - interval '1 day')
                                                  AS failed_last_day,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now())
               - min(run_at) FILTER (WHERE status = 'queued'
                                       AND run_at <= coalesce(%(now)s::timestamptz, now())))
                                                  AS oldest_ready_seconds,
       min(locked_until) FILTER (WHERE status = 'running') AS next_lease_expiry,
       count(*) FILTER (WHERE status = 'queued'
                          AND run_at <= coalesce(%(now)s::timestamptz, now())
                                        - %(stranded_after)s::interval
                          AND NOT EXISTS (
                            SELECT 1 FROM queue_watchers w
                            WHERE w.queue = jobs.queue
                              AND w.until > coalesce(%(now)s::timestamptz, now())))
                                                  AS stranded
FROM jobs
GROUP BY queue
ORDER BY queue;"""

JOB_TABLE_HEALTH: Final = """\
-- job_table_health: The jobs table's dead tuples and last (auto)vacuum, which the article says to watch.
SELECT n_live_tup, n_dead_tup, last_vacuum, last_autovacuum
FROM pg_stat_user_tables
WHERE relid = 'jobs'::regclass;"""

MIGRATION_LIST_APPLIED: Final = """\
-- migration_list_applied: Lists the schema versions already applied, oldest first.
SELECT version FROM pgkick_migrations ORDER BY version;"""

MIGRATION_LOCK: Final = """\
-- migration_lock: Serialises concurrent migrators until the end of the current transaction.
SELECT pg_advisory_xact_lock(hashtext('pgkick.migrate'));"""

MIGRATION_RECORD: Final = """\
-- migration_record: Records one applied schema version.
INSERT INTO pgkick_migrations (version, name) VALUES (%(version)s, %(name)s);"""

MIGRATION_TABLE_CREATE: Final = """\
-- migration_table_create: Creates the table that records which schema versions are applied.
CREATE TABLE IF NOT EXISTS pgkick_migrations (
  version    int         PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);"""

MIGRATION_TABLE_EXISTS: Final = """\
-- migration_table_exists: Says whether pgkick's migrations table exists here, without creating anything.
SELECT to_regclass('pgkick_migrations') IS NOT NULL AS exists;"""

QUEUE_KICK_RELEASE: Final = """\
-- queue_kick_release: Removes a pending kick that could not be sent, so the next producer kicks instead of trusting it.
DELETE FROM queue_watchers WHERE queue = %(queue)s AND watcher = 'kick';"""

QUEUE_KICK_RESERVE: Final = """\
-- queue_kick_reserve: Of the queues given, returns those that nobody watches, marking each with a pending kick; the caller kicks exactly those.
WITH relaxed AS (
  -- A reservation lost in a crash costs one spare kick: its commit need not wait for the disk.
  SELECT set_config('synchronous_commit', 'off', true)
), wanted AS (
  SELECT DISTINCT q AS queue FROM unnest(%(queues)s::text[]) AS q, relaxed
  WHERE NOT EXISTS (
    SELECT 1 FROM queue_watchers l
    WHERE l.queue = q AND l.until > coalesce(%(now)s::timestamptz, now())
  )
)
INSERT INTO queue_watchers AS w (queue, watcher, until)
SELECT queue, 'kick', coalesce(%(now)s::timestamptz, now()) + %(pending)s::interval FROM wanted
ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until
  WHERE w.until <= coalesce(%(now)s::timestamptz, now())
RETURNING w.queue;"""

QUEUE_WATCHER_ANNOUNCE: Final = """\
-- queue_watcher_announce: A worker says it is draining a queue until the given instant; it takes up the pending kick and clears expired watchers.
WITH cleared AS (
  DELETE FROM queue_watchers
  WHERE queue = %(queue)s
    AND (watcher = 'kick' OR until <= coalesce(%(now)s::timestamptz, now()))
    AND watcher <> %(watcher)s
)
INSERT INTO queue_watchers AS w (queue, watcher, until)
VALUES (%(queue)s, %(watcher)s, coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval)
ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until;"""

QUEUE_WATCHER_WITHDRAW: Final = """\
-- queue_watcher_withdraw: A worker leaving a queue removes its announcement (it then claims once more before it exits).
DELETE FROM queue_watchers WHERE queue = %(queue)s AND watcher = %(watcher)s;"""

ROLE_SETUP: Final = """\
-- role_setup: Creates the NOLOGIN roles pgkick_producer, pgkick_worker and pgkick_maintainer if missing, and grants each only what its part needs (grant them to your login roles).
-- Roles are cluster-wide and the migration lock is per database: a set-up running at once in
-- another database may create a role between our look and our CREATE, so a duplicate is
-- caught (in its own subtransaction) and taken as done.
DO $roles$
DECLARE
  role_name text;
BEGIN
  FOREACH role_name IN ARRAY ARRAY['pgkick_producer', 'pgkick_worker', 'pgkick_maintainer'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = role_name) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
      EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL;  -- created meanwhile by a set-up in another database
      END;
    END IF;
  END LOOP;
  IF NOT pg_has_role('pgkick_maintainer', 'pgkick_worker', 'MEMBER') THEN
    BEGIN
      GRANT pgkick_worker TO pgkick_maintainer;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;
    END;
  END IF;
END
$roles$;

REVOKE ALL ON jobs, pgkick_migrations FROM PUBLIC;
GRANT SELECT ON pgkick_migrations TO pgkick_producer, pgkick_worker;

-- The app: insert jobs, and read back only what the insert returns (never payloads or status).
GRANT INSERT (queue, task, payload, run_at, max_attempts) ON jobs TO pgkick_producer;
GRANT SELECT (id, queue, run_at) ON jobs TO pgkick_producer;

-- Workers: claim, complete, fail, extend.
GRANT SELECT ON jobs TO pgkick_worker;
GRANT UPDATE (status, attempts, run_at, locked_until, last_error, finished_at, claimed_at)
  ON jobs TO pgkick_worker;

-- The reaper and operators: also retry (more attempts), purge and cancel.
GRANT UPDATE (max_attempts), DELETE ON jobs TO pgkick_maintainer;

-- Who watches which queue: producers reserve kicks, workers announce and withdraw.
REVOKE ALL ON queue_watchers FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON queue_watchers TO pgkick_producer, pgkick_worker;"""

SESSION_LIST_ACTIVITY: Final = """\
-- session_list_activity: The server's now, how many sessions this database has ever had, and the sessions a serverless compute's activity monitor looks at: client backends of this database, autovacuum workers, walsenders (one row with a NULL pid when there are none).
SELECT now() AS now,
       (SELECT sessions FROM pg_stat_database WHERE datname = current_database()) AS sessions_ever,
       a.pid, a.application_name, a.backend_type, a.state, a.state_change
FROM (SELECT 1) AS one
LEFT JOIN pg_stat_activity AS a
  ON a.pid <> pg_backend_pid()
 AND (a.backend_type IN ('autovacuum worker', 'walsender')
      OR (a.backend_type = 'client backend' AND a.datname = current_database()));"""

SESSION_TERMINATE_CLIENTS: Final = """\
-- session_terminate_clients: Closes the other client sessions of this database that have been idle for the whole window, as a suspending compute does (one that connected a moment ago is not caught); only those with one of the given application names, unless none are given.
SELECT count(pg_terminate_backend(pid)) AS closed
FROM pg_stat_activity
WHERE pid <> pg_backend_pid()
  AND backend_type = 'client backend'
  AND datname = current_database()
  AND state = 'idle'
  AND state_change < now() - make_interval(secs => %(window)s)
  AND (%(apps)s::text[] IS NULL OR application_name = ANY(%(apps)s::text[]));"""

TRANSACTION_BEGIN: Final = """\
-- transaction_begin: Opens an explicit transaction inside a pipeline, so a COMMIT can end it before the statements that must see it committed.
BEGIN;"""

TRANSACTION_COMMIT: Final = """\
-- transaction_commit: Commits the transaction transaction_begin opened; statements after it in the pipeline run in a new one.
COMMIT;"""

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
)
