"""The statements only the benchmark, the demo and the awake comparison run:
generated from tools/sql/ by tools/bundle_sql.py. Never shipped to Lambda.
"""

from typing import Final

BENCH_SCHEMA_CREATE: Final = """\
-- bench_schema_create: Creates the schema pgkick_before_groups, where the claim-order bench keeps a jobs table as it was before migration 0004.
CREATE SCHEMA pgkick_before_groups;"""

BENCH_SCHEMA_DROP: Final = """\
-- bench_schema_drop: Drops the schema pgkick_before_groups the claim-order bench made.
DROP SCHEMA IF EXISTS pgkick_before_groups CASCADE;"""

BENCH_SEARCH_PATH_SET: Final = """\
-- bench_search_path_set: Points this session's unqualified names at the schema pgkick_before_groups (the claim-order bench's table as it was before migration 0004).
SELECT set_config('search_path', 'pgkick_before_groups', false);"""

DATABASE_SCRATCH_STATE: Final = """\
-- database_scratch_state: Whether this database has a jobs table, whether pgkick bench or demo marked it as their own, and whether a peer queue's tables are here.
SELECT to_regclass(quote_ident(%(schema)s) || '.jobs') IS NOT NULL AS has_jobs_table,
       coalesce(obj_description(to_regclass(quote_ident(%(schema)s) || '.jobs'), 'pg_class'), '')
         = 'pgkick scratch: made for pgkick bench and demo, which may empty it' AS ours,
       to_regclass('pgqueuer') IS NOT NULL
         OR to_regclass('procrastinate_jobs') IS NOT NULL AS has_peer_tables;"""

JOB_BACKLOG_FILL: Final = """\
-- job_backlog_fill: Fills a queue (default unless named) with count ready jobs, due a millisecond apart in the past, with priorities spread over -5..5 (or all 0) and groups interleaved (n mod groups; none when groups is 0).
INSERT INTO pgkick.jobs (queue, task, payload, run_at, priority, group_key)
SELECT coalesce(%(queue)s::text, 'default'), 'noop', '{}', now() - interval '1 day' + n * interval '1 millisecond',
       CASE WHEN %(priorities)s::boolean THEN (n %% 11) - 5 ELSE 0 END,
       CASE WHEN %(groups)s::int > 0 AND n %% 2 = 0 THEN 'g' || (n %% %(groups)s::int) END
FROM generate_series(1, %(count)s::int) AS n;"""

JOB_BACKLOG_FILL_BEFORE_GROUPS: Final = """\
-- job_backlog_fill_before_groups: Fills a queue with count ready jobs, due a millisecond apart in the past, in a jobs table as it was before migration 0004.
INSERT INTO pgkick.jobs (queue, task, payload, run_at)
SELECT 'default', 'noop', '{}', now() - interval '1 day' + n * interval '1 millisecond'
FROM generate_series(1, %(count)s::int) AS n;"""

JOB_BACKLOG_FILL_KEYED: Final = """\
-- job_backlog_fill_keyed: Fills a queue with count ready jobs, due a millisecond apart in the past, spread over keys tenants (job n: group k<n mod keys> and the same rate key), for the claim with a rate per key and a concurrency per key (migration 0014).
INSERT INTO pgkick.jobs (queue, task, payload, run_at, group_key, rate_key)
SELECT 'default', 'noop', '{}', now() - interval '1 day' + n * interval '1 millisecond',
       'k' || (n %% %(keys)s::int), 'k' || (n %% %(keys)s::int)
FROM generate_series(1, %(count)s::int) AS n;"""

JOB_CLAIM_BEFORE_GROUPS: Final = """\
-- job_claim_before_groups: The claim as it was before migration 0004 (run_at order, no groups or limits): the baseline the bench holds the new claim against.
WITH next AS (
  SELECT id FROM pgkick.jobs
  WHERE queue = %(queue)s AND status = 'queued'
    AND run_at <= coalesce(%(now)s::timestamptz, now())
  ORDER BY run_at
  LIMIT %(batch)s
  FOR UPDATE SKIP LOCKED
)
UPDATE pgkick.jobs j
SET status       = 'running',
    attempts     = j.attempts + 1,
    locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    claimed_at   = coalesce(%(now)s::timestamptz, clock_timestamp())
FROM next
WHERE j.id = next.id
RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts;"""

JOB_CLAIM_NAIVE: Final = """\
-- job_claim_naive: The article's WRONG claim (no row lock on the choice), marking the job done; kept only to show the race.
UPDATE pgkick.jobs
SET status = 'done', attempts = attempts + 1, finished_at = now()
WHERE id = (
  SELECT id FROM pgkick.jobs
  WHERE status = 'queued'
  ORDER BY run_at
  LIMIT 1
)
RETURNING id, attempts;"""

JOB_COUNT_BY_STATUS: Final = """\
-- job_count_by_status: Counts jobs by status with the most attempts any took (the article's table).
SELECT status, count(*) AS count, max(attempts) AS max_attempts FROM pgkick.jobs GROUP BY status ORDER BY status;"""

JOB_DELAY_SUMMARY: Final = """\
-- job_delay_summary: The bench's quiet day with faults: how many jobs ended done, how many were claimed more than once, how many are still not done, and the worst wait from run_at to finish (seconds).
SELECT count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE attempts > 1) AS claimed_again,
       count(*) FILTER (WHERE status <> 'done') AS not_done,
       coalesce(max(extract(epoch FROM finished_at - run_at)), 0)::float AS worst_delay_s
FROM pgkick.jobs;"""

JOB_DEPENDANT_START_WAIT: Final = """\
-- job_dependant_start_wait: Each finished dependant's task and the ms from its last parent's finish to its claim (the dependencies benchmark's release latency).
SELECT c.task,
       extract(epoch FROM c.claimed_at - max(p.finished_at)) * 1000 AS wait_ms
FROM pgkick.job_dependencies AS d
JOIN pgkick.jobs AS c ON c.id = d.child_id
JOIN pgkick.jobs AS p ON p.id = d.parent_id
WHERE c.status = 'done'
GROUP BY c.id, c.task, c.claimed_at;"""

JOB_DONE_SPAN: Final = """\
-- job_done_span: How many jobs are done and the seconds from the first claim to the last finish (the pipelined ceiling's time: neither pgbench's connecting nor its rounds on an empty queue).
SELECT count(*) AS done,
       coalesce(extract(epoch FROM max(finished_at) - min(claimed_at)), 0)::float8 AS seconds
FROM pgkick.jobs
WHERE status = 'done';"""

JOB_HISTORY_FILL: Final = """\
-- job_history_fill: Adds count finished jobs of history (done a day ago), to measure the claim on a long-lived table.
INSERT INTO pgkick.jobs (queue, task, payload, status, run_at, attempts, finished_at, created_at)
SELECT 'default', 'noop', '{}', 'done', now() - interval '1 day', 1,
       now() - interval '1 day', now() - interval '1 day'
FROM generate_series(1, %(count)s);"""

JOB_LATENCY_ALL: Final = """\
-- job_latency_all: Each job's status, attempts and wait from commit to claim in ms (the kicks benchmark's check).
SELECT status, attempts,
       extract(epoch FROM claimed_at - created_at) * 1000 AS wait_ms
FROM pgkick.jobs;"""

JOB_LATENCY_WARM: Final = """\
-- job_latency_warm: Wait from commit to claim in ms of the jobs inserted after the first claim (those a running worker served, not a cold start), each marked whether it was inserted after the first job finished too (once the worker's first batch had run: its rescue's booking behind it).
SELECT extract(epoch FROM j.claimed_at - j.created_at) * 1000 AS wait_ms,
       j.created_at > f.first_finish AS after_first_batch
FROM pgkick.jobs j,
     (SELECT min(claimed_at) AS first_claim, min(finished_at) AS first_finish
      FROM pgkick.jobs) f
WHERE j.claimed_at IS NOT NULL
  AND j.created_at > f.first_claim;"""

JOB_NOTIFY_LISTENERS: Final = """\
-- job_notify_listeners: Tells LISTENing workers that a queue has work (the article's trigger, sent by the producer in the comparison).
SELECT pg_notify('pgkick_jobs', %(queue)s);"""

JOB_SPAWNED_START_WAIT: Final = """\
-- job_spawned_start_wait: Each finished child of the dependencies benchmark's fan-out and the ms from its row's creation (its spawner's completion transaction, where a spawned job is written) to its claim.
SELECT extract(epoch FROM claimed_at - created_at) * 1000 AS wait_ms
FROM pgkick.jobs
WHERE task = 'bench_fan_child' AND status = 'done';"""

JOB_TABLE_ANALYZE: Final = """\
-- job_table_analyze: Refreshes the planner's statistics of the jobs table after a bulk load.
ANALYZE pgkick.jobs;"""

JOB_TABLE_ANY_ROW: Final = """\
-- job_table_any_row: Whether the jobs table holds any job at all (bench and demo refuse a database whose jobs are not theirs).
SELECT EXISTS (SELECT FROM pgkick.jobs) AS any_job;"""

JOB_TABLE_MARK_SCRATCH: Final = """\
-- job_table_mark_scratch: Marks the jobs table as pgkick bench's and demo's own, so that they may empty it and use it again (never an app's queue).
COMMENT ON TABLE pgkick.jobs IS 'pgkick scratch: made for pgkick bench and demo, which may empty it';"""

JOB_TRUNCATE_ALL: Final = """\
-- job_truncate_all: Empties the jobs table between benchmark items, and with it the tables that reference jobs (dependencies, durable steps: CASCADE), benchmarks only: never on a real queue.
TRUNCATE pgkick.jobs CASCADE;"""

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

QUEUE_LIMITS_CLEAR_ALL: Final = """\
-- queue_limits_clear_all: Removes every queue's limits, rates' starts and round-robin cursors (the bench's reset between variants).
WITH starts AS (DELETE FROM pgkick.job_starts), cursors AS (DELETE FROM pgkick.queue_claim_cursors)
DELETE FROM pgkick.queue_limits;"""

QUEUE_WATCHERS_CLEAR: Final = """\
-- queue_watchers_clear: Forgets every worker announcement and pending kick between benchmark items (benchmarks only).
DELETE FROM pgkick.queue_watchers;"""

SESSION_COUNT_ESTABLISHED: Final = """\
-- session_count_established: How many sessions this database has ever had (pg_stat_database.sessions; run in autocommit, so each read is fresh).
SELECT sessions FROM pg_stat_database WHERE datname = current_database();"""

SESSION_COUNT_OTHERS: Final = """\
-- session_count_others: How many client sessions other than this one are connected to this database now.
SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend';"""

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

SESSION_LISTEN: Final = """\
-- session_listen: Subscribes this session to job notifications (what LISTEN-based peers hold open).
LISTEN pgkick_jobs;"""

SESSION_STATS_FLUSH: Final = """\
-- session_stats_flush: Makes this session's pending statistics (its own connection among them) reach pg_stat_database at the end of this statement.
SELECT pg_stat_force_next_flush();"""

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

STATEMENT_CALL_TOTAL: Final = """\
-- statement_call_total: Statements run in this database so far (pg_stat_statements), leaving out this count itself: the idle query rate.
SELECT coalesce(sum(calls), 0)::bigint AS calls
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '-- statement_call_total:%%';"""

STATEMENT_STATS_INSTALL: Final = """\
-- statement_stats_install: Installs pg_stat_statements in this database when the server preloads it (for the idle query rate).
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"""

STATEMENT_STATS_LOADED: Final = """\
-- statement_stats_loaded: Whether the server preloads pg_stat_statements, so its counts can be read (else the benchmark counts transactions instead).
SELECT position('pg_stat_statements' IN current_setting('shared_preload_libraries')) > 0 AS loaded;"""

TRANSACTION_TOTAL: Final = """\
-- transaction_total: Transactions committed and rolled back in this database so far (pg_stat_database; final once the sessions that ran them have ended), the statement count's stand-in without pg_stat_statements.
SELECT xact_commit + xact_rollback AS transactions FROM pg_stat_database WHERE datname = current_database();"""
