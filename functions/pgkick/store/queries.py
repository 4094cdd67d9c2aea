"""Every SQL statement pgkick runs: generated from sql/ by tools/bundle_sql.py.

Do not edit: change sql/ and regenerate. Each constant is the named file's text,
whose first line says what it does.
"""

from typing import Final, LiteralString

CHANNEL_LISTEN: Final = """\
-- channel_listen: Listen on a channel for this session (the name is spliced in as a quoted identifier, pgkick.store.listen: LISTEN takes no parameter).
LISTEN {channel};"""

CHANNEL_UNLISTEN: Final = """\
-- channel_unlisten: Stop listening on a channel (the name is spliced in as a quoted identifier, as for channel_listen).
UNLISTEN {channel};"""

DATABASE_CLONE: Final = """\
-- database_clone: One test's own database, a copy of the plugin's migrated template (pgkick.testing.databases replaces both placeholder names by generated, quoted ones).
CREATE DATABASE pgkick_test_db TEMPLATE pgkick_test_template;"""

DATABASE_CREATE: Final = """\
-- database_create: A database for pgkick.testing's pytest plugin; the names are placeholders the plugin replaces by generated, quoted ones.
CREATE DATABASE pgkick_test_db;"""

DATABASE_DROP: Final = """\
-- database_drop: Drop a database pgkick.testing's plugin created, ending its sessions (a worker or a lingering producer connection of the test); the name is a placeholder replaced by the plugin.
DROP DATABASE IF EXISTS pgkick_test_db WITH (FORCE);"""

DATABASE_SESSION_CLAIM: Final = """\
-- database_session_claim: Take a test session's advisory lock, on the session's own connection, held until it ends (or its process dies and the server ends the connection): pgkick.testing's mark that the session's pgkick_test_* databases are in use; false when another session holds it.
SELECT pg_try_advisory_lock(%(space)s::int4, %(session)s::int4);"""

DATABASE_SESSION_RELEASE: Final = """\
-- database_session_release: Release a test session's advisory lock taken by database_session_claim (a dead session's, taken to drop its databases, or the session's own at its end).
SELECT pg_advisory_unlock(%(space)s::int4, %(session)s::int4);"""

DATABASE_TEST_LIST: Final = """\
-- database_test_list: The names of the databases pgkick.testing's plugin made on this server (pgkick_test_*), whatever session made them: the next session drops those of a dead one.
SELECT datname FROM pg_database WHERE starts_with(datname, 'pgkick_test_') ORDER BY datname;"""

JOB_AWAIT: Final = """\
-- job_await: Links jobs just inserted (still queued, in this transaction) to their parents, as pairs (child, parent, policy): the server-side job_await of migration 0017, which flags and locks the parents, ends at once a child whose parent already failed, and returns the children left waiting.
SELECT id
FROM pgkick.job_await(%(children)s::bigint[], %(parents)s::bigint[], %(policies)s::text[],
                      %(now)s::timestamptz);"""

JOB_CANCEL_QUEUED: Final = """\
-- job_cancel_queued: Fails queued or waiting jobs (by ids, or by queue and task) with last_error 'cancelled by operator' (a waiting one's count of parents cleared, and its own dependants then settled by the dependency trigger); running jobs are left to finish.
UPDATE pgkick.jobs
SET status      = 'failed',
    waiting_on  = 0,
    finished_at = coalesce(%(now)s::timestamptz, now()),
    last_error  = 'cancelled by operator'
WHERE status IN ('queued', 'waiting')
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
RETURNING id, queue;"""

JOB_CANCEL_REQUESTED_AMONG: Final = """\
-- job_cancel_requested_among: Of the jobs a worker holds (each fenced by its attempt), those an operator asked to cancel: a read by primary key, no lease written (the lease keeper's check between two extensions, so a cancel reaches a task within seconds whatever the lease).
SELECT j.id
FROM pgkick.jobs j
JOIN unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempts) ON j.id = held.id
WHERE j.status = 'running' AND j.attempts = held.attempts
  AND j.cancel_requested_at IS NOT NULL;"""

JOB_CANCEL_RUNNING: Final = """\
-- job_cancel_running: Marks running jobs (by ids, or by queue and task) for cancellation; the worker's heartbeat reads the mark, and the job ends failed 'cancelled by operator' when its task stops.
UPDATE pgkick.jobs
SET cancel_requested_at = coalesce(cancel_requested_at, coalesce(%(now)s::timestamptz, now()))
WHERE status = 'running'
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
RETURNING id, queue;"""

JOB_CLAIM: Final = """\
-- job_claim: Claims up to batch ready jobs of a queue, highest priority first then run_at, under a lease, skipping rows other workers hold (FOR UPDATE SKIP LOCKED); grouped jobs (one running per group: its head in claim order, or its job waiting for a retry) and limited queues (at most the limit's room) under the queue's claim lock: one statement, the server-side function of migration 0007 (pgkick.groups); each job with the trace context it was enqueued under (0012) and, if timed (a worker that traces), its enqueue, due and claim times (three timestamps cost about 2 us a job to send and parse; NULLs nothing); and whether its previous attempt's lease lapsed (0035: a suspect, run last and marked started by job_lapsed_start); if timed, when its last parent released it (0037: a dependant's wait is measured from there).
SELECT id, queue, task, payload, attempts, max_attempts, traceparent, tracestate,
       CASE WHEN %(timed)s::bool THEN enqueued_at END,
       CASE WHEN %(timed)s::bool THEN run_at END,
       CASE WHEN %(timed)s::bool THEN claimed_at END, lapsed,
       CASE WHEN %(timed)s::bool THEN released_at END
FROM pgkick.job_claim(%(queue)s::text, %(batch)s::int, %(lease)s::interval, %(now)s::timestamptz);"""

JOB_CLAIM_FAIR_PLAN: Final = """\
-- job_claim_fair_plan: Has a new session compile the round-robin claim of queues with a rate or a concurrency (job_claim_fair_ids, migration 0023) and plan its walk, if any queue has one: a call for a batch of 0 on a queue no job can be in, which walks no key and writes nothing (no start, no cursor); a cold start's thread runs it beside the plain claim's (pgkick.worker.cold_start), so the first claim of a limited queue does not pay it. No queue with a limit: no call.
SELECT pgkick.job_claim_fair_ids('', 0, now(), NULL, NULL, 1)
WHERE EXISTS (SELECT 1 FROM pgkick.queue_limits l
              WHERE l.rate_limit IS NOT NULL OR l.concurrency IS NOT NULL);"""

JOB_COMMITTED_AMONG: Final = """\
-- job_committed_among: Which of the given job ids exist (committed, not rolled back with a savepoint), with their queue and due time.
SELECT id, queue, run_at FROM pgkick.jobs WHERE id = ANY(%(ids)s::bigint[]);"""

JOB_COMPLETE: Final = """\
-- job_complete: Marks one running job done, only while this attempt still holds it (fenced; 0 rows = lease lost): the server-side job_complete of migration 0010, for one job with no result; with the queues its dependants entered (migration 0017), NULL when none.
SELECT id, nullif(current_setting('pgkick.released_queues', true), '')
FROM pgkick.job_complete(ARRAY[%(id)s]::bigint[], ARRAY[%(attempts)s]::int[], NULL::text[],
                         %(now)s::timestamptz);"""

JOB_COMPLETE_AND_CLAIM: Final = """\
-- job_complete_and_claim: Completes a worker's last batch (fenced, each job by its attempt, with its result) and then claims the next: one statement, the server-side function of migration 0008; rows with a NULL task are the completed ids still held, then the claimed jobs (with job_claim's trace context, its times if timed, its lapsed flag, migration 0035, and if timed its release, migration 0037); the last column, on the completed ids' rows, the queues their dependants entered (migration 0017), NULL when none.
SELECT id, queue, task, payload, attempts, max_attempts, traceparent, tracestate,
       CASE WHEN %(timed)s::bool THEN enqueued_at END,
       CASE WHEN %(timed)s::bool THEN run_at END,
       CASE WHEN %(timed)s::bool THEN claimed_at END, lapsed,
       CASE WHEN %(timed)s::bool THEN released_at END,
       CASE WHEN task IS NULL THEN nullif(current_setting('pgkick.released_queues', true), '') END
FROM pgkick.job_complete_and_claim(%(ids)s::bigint[], %(attempts)s::int[], %(results)s::text[],
                                   %(queue)s::text, %(batch)s::int, %(lease)s::interval,
                                   %(now)s::timestamptz);"""

JOB_COMPLETE_MANY: Final = """\
-- job_complete_many: Marks a batch of running jobs done in one statement, each fenced by its own attempt, storing each one's result (JSON text or NULL): the server-side job_complete of migration 0010; returns the ids still held, each with the queues that jobs waiting on them entered (migration 0017's pgkick.released_queues, set in this statement's transaction; NULL when none).
SELECT id, nullif(current_setting('pgkick.released_queues', true), '')
FROM pgkick.job_complete(%(ids)s::bigint[], %(attempts)s::int[], %(results)s::text[],
                         %(now)s::timestamptz);"""

JOB_CONTINUE: Final = """\
-- job_continue: Puts a running job whose invocation ran short of time for its next step back in the queue, due now, without using an attempt (a continuation: its finished steps stay stored), counting it and, when it continued before any step ran (stalled), the time the invocation had left (migration 0037: the larger one kept while it stalls again, the stall guard's measure of a claim as late as that) (fenced: only while this attempt holds it); or, when a cancel was requested since the worker's last heartbeat, fails it 'cancelled by operator'. Returns its status.
UPDATE pgkick.jobs
SET status            = CASE WHEN cancel_requested_at IS NULL THEN 'queued' ELSE 'failed' END,
    attempts          = CASE WHEN cancel_requested_at IS NULL THEN attempts - 1 ELSE attempts END,
    run_at            = CASE WHEN cancel_requested_at IS NULL
                             THEN coalesce(%(now)s::timestamptz, now()) ELSE run_at END,
    finished_at       = CASE WHEN cancel_requested_at IS NULL THEN finished_at
                             ELSE coalesce(%(now)s::timestamptz, now()) END,
    last_error        = CASE WHEN cancel_requested_at IS NULL THEN last_error
                             ELSE 'cancelled by operator' END,
    continued         = continued + 1,
    continued_stalled = %(stalled)s::boolean,
    continued_left_ms = CASE WHEN %(stalled)s::boolean  -- (greatest() skips a NULL)
                             THEN greatest(CASE WHEN continued_stalled THEN continued_left_ms END,
                                           %(left_ms)s::int)
                        END,
    locked_until      = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING status;"""

JOB_DELETE_FINISHED_AMONG: Final = """\
-- job_delete_finished_among: Deletes the jobs among ids that still match the bulk purge's selection as each row is deleted (its latest version): a status among the selection's statuses (done or failed), and a last error containing the selection's text if it has one (case-insensitive), the two filtered columns a job can change once selected (queue, task, keys, group and created_at never change), so a job retried and run to done, or failed again with another error, since it was counted is left alone; as job_purge_finished, never a parent one of whose dependants is not done (the caller passes it again once that dependant went, if it was selected too); returns their ids.
DELETE FROM pgkick.jobs AS j
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.status IN ('done', 'failed')
  AND j.status = ANY(%(statuses)s::text[])
  AND (%(error)s::text IS NULL OR strpos(lower(j.last_error), lower(%(error)s::text)) > 0)
  AND NOT (j.has_dependants AND EXISTS (
    SELECT 1 FROM pgkick.job_dependencies AS d JOIN pgkick.jobs AS c ON c.id = d.child_id
    WHERE d.parent_id = j.id AND c.status <> 'done'))
RETURNING j.id;"""

JOB_DEPENDANTS_READY_QUEUES: Final = """\
-- job_dependants_ready_queues: The queues of a job's dependants, direct or transitive, that are queued now: what a worker kicks after a job with dependants failed (its 'run anyway' dependants were released by migration 0017's trigger in the fail's own statement).
WITH RECURSIVE below AS (
  SELECT d.child_id FROM pgkick.job_dependencies d WHERE d.parent_id = %(id)s
  UNION
  SELECT d.child_id FROM pgkick.job_dependencies d JOIN below b ON d.parent_id = b.child_id
)
SELECT DISTINCT j.queue
FROM below b JOIN pgkick.jobs j ON j.id = b.child_id
WHERE j.status = 'queued'
ORDER BY j.queue;"""

JOB_EXTEND: Final = """\
-- job_extend: Pushes a running job's lease forward, only while this attempt still holds it (fenced; 0 rows = stop working); also says whether an operator asked to cancel it.
UPDATE pgkick.jobs
SET locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING locked_until, cancel_requested_at IS NOT NULL;"""

JOB_EXTEND_MANY: Final = """\
-- job_extend_many: Pushes the leases of a batch forward in one statement, each fenced by its own attempt; returns the ids still held, each with whether an operator asked to cancel it.
UPDATE pgkick.jobs j
SET locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempts)
WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
RETURNING j.id, j.cancel_requested_at IS NOT NULL;"""

JOB_FAIL: Final = """\
-- job_fail: Records a failed attempt (fenced): queued again after backoff x 2^attempts (default 10 s, at most the cap, default 1 hour) times the caller's jitter factor, or failed at max_attempts, when permanent, or 'cancelled by operator' when a cancel was requested since the worker's last heartbeat; has_dependants says whether dependants may have been released (migration 0017).
UPDATE pgkick.jobs
SET status       = CASE WHEN %(permanent)s::boolean OR attempts >= max_attempts
                             OR cancel_requested_at IS NOT NULL
                        THEN 'failed' ELSE 'queued' END,
    run_at       = CASE WHEN %(permanent)s::boolean OR attempts >= max_attempts
                             OR cancel_requested_at IS NOT NULL THEN run_at
                        ELSE coalesce(%(now)s::timestamptz, now())
                             + least(coalesce(%(backoff_cap)s::interval, interval '1 hour'),
                                     coalesce(%(backoff)s::interval, interval '10 seconds')
                                     * 2 ^ least(attempts, 20))
                               * coalesce(%(jitter)s::float8, 1.0)
                   END,
    finished_at  = CASE WHEN %(permanent)s::boolean OR attempts >= max_attempts
                             OR cancel_requested_at IS NOT NULL
                        THEN coalesce(%(now)s::timestamptz, now()) END,
    locked_until = NULL,
    last_error   = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled by operator'
                        ELSE left(%(error)s, 2000) END
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING id, queue, status, run_at, has_dependants;"""

JOB_GET: Final = """\
-- job_get: Reads one job whole (payload, result, attempts, last error, timestamps, lease, cancel mark, and its first 50 parents and dependants with how many parents it still waits on) with the instant it was read, for `pgkick job` and the dashboard's job page.
SELECT id, queue, task, status, payload, result, attempts, max_attempts, priority,
       unique_key, group_key, last_error, created_at, run_at, claimed_at, finished_at,
       locked_until, cancel_requested_at, coalesce(%(now)s::timestamptz, now()) AS read_at,
       waiting_on,
       ARRAY(SELECT d.parent_id FROM pgkick.job_dependencies d
             WHERE d.child_id = %(id)s::bigint ORDER BY d.parent_id LIMIT 50) AS parents,
       ARRAY(SELECT d.child_id FROM pgkick.job_dependencies d
             WHERE d.parent_id = %(id)s::bigint ORDER BY d.child_id LIMIT 50) AS dependants
FROM pgkick.jobs
WHERE id = %(id)s::bigint;"""

JOB_GET_LATEST_BY_UNIQUE_KEYS: Final = """\
-- job_get_latest_by_unique_keys: For each unique key, its newest job (the one holding the key, if any does: a job with the key is only inserted while none is live).
SELECT DISTINCT ON (unique_key) id, queue, run_at, unique_key
FROM pgkick.jobs
WHERE unique_key = ANY(%(unique_keys)s::text[])
ORDER BY unique_key, id DESC;"""

JOB_GET_MANY: Final = """\
-- job_get_many: Reads jobs by id, for the CLI and the demo's report.
SELECT id, queue, task, status, attempts, max_attempts, run_at, locked_until, last_error,
       created_at, claimed_at, finished_at
FROM pgkick.jobs
WHERE id = ANY(%(ids)s::bigint[])
ORDER BY id;"""

JOB_ID_LAST: Final = """\
-- job_id_last: The highest job id in the table, 0 when it is empty: where the jobs of a pgkick.testing block begin.
SELECT coalesce(max(id), 0) FROM pgkick.jobs;"""

JOB_ID_PAGE_MATCHING: Final = """\
-- job_id_page_matching: Up to `limit` ids (and statuses) of the jobs a bulk action selects, in id order above a cursor: by statuses, task, queue, unique key, group, created range and error text (a substring, lower() against lower(): any case for ASCII letters, others as the database's LC_CTYPE folds them), and for a retry attempts below the limit (job_retry_failed leaves a job that used them all failed, so a dry run must not count it); read-only and lock-free (the action's own statement re-checks each job's status as it writes).
SELECT id, status
FROM pgkick.jobs
WHERE id > %(after)s::bigint
  AND status = ANY(%(statuses)s::text[])
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(unique_key)s::text IS NULL OR unique_key = %(unique_key)s::text)
  AND (%(group_key)s::text IS NULL OR group_key = %(group_key)s::text)
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s::timestamptz)
  AND (%(error)s::text IS NULL OR strpos(lower(last_error), lower(%(error)s::text)) > 0)
  AND (%(attempts_below)s::int IS NULL OR attempts < %(attempts_below)s::int)
ORDER BY id
LIMIT %(limit)s::int;"""

JOB_ID_RANGE: Final = """\
-- job_id_range: The lowest and highest job ids (two probes of the primary key), where a bounded page of `pgkick jobs` starts and whether older ids remain.
SELECT (SELECT min(id) FROM pgkick.jobs) AS low, (SELECT max(id) FROM pgkick.jobs) AS high;"""

JOB_ID_RESERVE: Final = """\
-- job_id_reserve: Reserves n ids from the jobs' identity sequence in one statement, in ascending order (the children a running task spawns, inserted with these ids in its completion's transaction; a sequence is not transactional: an id never used is a harmless gap).
SELECT nextval(s.seq)
FROM (SELECT pg_get_serial_sequence(quote_ident(%(schema)s) || '.jobs', 'id')::regclass AS seq) s,
     generate_series(1, %(n)s::int) AS g(n)
ORDER BY g.n;"""

JOB_INSERT: Final = """\
-- job_insert: Inserts one queued job, due at run_at or after delay, and returns its id, queue and due time.
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts, priority, group_key,
                         traceparent, tracestate, rate_key)
VALUES (%(queue)s, %(task)s, %(payload)s::jsonb,
        coalesce(%(run_at)s::timestamptz,
                 coalesce(%(now)s::timestamptz, now()) + %(delay)s::interval),
        %(max_attempts)s, %(priority)s, %(group_key)s, %(traceparent)s, %(tracestate)s,
        %(rate_key)s)
RETURNING id, queue, run_at;"""

JOB_INSERT_FLOW: Final = """\
-- job_insert_flow: Enqueues one debounced or throttled job through pgkick.job_insert_flow (migration 0015): the job inserted, or its key's queued job with the new payload and due time (debounce), or the job holding the key for the period (throttle); touched says whether anything was written.
SELECT id, queue, run_at, touched
FROM pgkick.job_insert_flow(%(queue)s, %(task)s, %(payload)s::jsonb, %(run_at)s::timestamptz,
                            %(delay)s::interval, %(max_attempts)s, %(priority)s, %(group_key)s,
                            %(unique_key)s, %(traceparent)s, %(tracestate)s,
                            %(debounce)s::interval, %(max_delay)s::interval,
                            %(throttle)s::interval, %(now)s::timestamptz);"""

JOB_INSERT_MANY: Final = """\
-- job_insert_many: Inserts many queued jobs in one round trip from parallel arrays (a NULL array: every job has the one value given beside it) (binary; delays in seconds), returning ids in input order; one trace context for the whole batch (its enqueue_many's).
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts, priority, group_key,
                         traceparent, tracestate, rate_key)
SELECT coalesce(q, %(queue)s::text), coalesce(t, %(task)s::text), p::jsonb,
       coalesce(r, %(run_at)s::timestamptz,
                coalesce(%(now)s::timestamptz, now())
                + make_interval(secs => coalesce(d, %(delay)s::float8))),
       coalesce(m, %(max_attempt)s::int), coalesce(pr, %(priority)s::int),
       coalesce(g, %(group)s::text), %(traceparent)s::text, %(tracestate)s::text,
       coalesce(k, %(rate_key)s::text)
FROM unnest(%(queues)b::text[], %(tasks)b::text[], %(payloads)b::text[],
            %(run_ats)b::timestamptz[], %(delays)b::float8[], %(max_attempts)b::int[],
            %(priorities)b::int[], %(groups)b::text[], %(rate_keys)b::text[])
     WITH ORDINALITY AS x(q, t, p, r, d, m, pr, g, k, n)
ORDER BY n
RETURNING id, queue, run_at;"""

JOB_INSERT_MANY_IDS: Final = """\
-- job_insert_many_ids: Inserts as job_insert_many does, returning only the ids, in input order, for enqueue_many's chunks, whose queues and due times the caller already knows (each job's own queue; its run_at, else the transaction's now (transaction_now) plus its delay). Sending 100,000 queues and timestamps back, as text, and parsing them cost a tenth of a bulk insert's time or more (issue 32).
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts, priority, group_key,
                         traceparent, tracestate, rate_key)
SELECT coalesce(q, %(queue)s::text), coalesce(t, %(task)s::text), p::jsonb,
       coalesce(r, %(run_at)s::timestamptz,
                coalesce(%(now)s::timestamptz, now())
                + make_interval(secs => coalesce(d, %(delay)s::float8))),
       coalesce(m, %(max_attempt)s::int), coalesce(pr, %(priority)s::int),
       coalesce(g, %(group)s::text), %(traceparent)s::text, %(tracestate)s::text,
       coalesce(k, %(rate_key)s::text)
FROM unnest(%(queues)b::text[], %(tasks)b::text[], %(payloads)b::text[],
            %(run_ats)b::timestamptz[], %(delays)b::float8[], %(max_attempts)b::int[],
            %(priorities)b::int[], %(groups)b::text[], %(rate_keys)b::text[])
     WITH ORDINALITY AS x(q, t, p, r, d, m, pr, g, k, n)
ORDER BY n
RETURNING id;"""

JOB_INSERT_MANY_RESERVED: Final = """\
-- job_insert_many_reserved: Inserts many queued jobs with ids reserved earlier (job_id_reserve) from parallel arrays (a NULL array: every job has the one value given beside it) (binary; delays in seconds), returning id, queue and due time in input order; one trace context for the whole batch (its spawn's): a spawning task's children, written in its completion's transaction.
INSERT INTO pgkick.jobs (id, queue, task, payload, run_at, max_attempts, priority, group_key,
                         traceparent, tracestate, rate_key)
OVERRIDING SYSTEM VALUE
SELECT i, coalesce(q, %(queue)s::text), coalesce(t, %(task)s::text), p::jsonb,
       coalesce(r, %(run_at)s::timestamptz,
                coalesce(%(now)s::timestamptz, now())
                + make_interval(secs => coalesce(d, %(delay)s::float8))),
       coalesce(m, %(max_attempt)s::int), coalesce(pr, %(priority)s::int),
       coalesce(g, %(group)s::text), %(traceparent)s::text, %(tracestate)s::text,
       coalesce(k, %(rate_key)s::text)
FROM unnest(%(ids)b::bigint[], %(queues)b::text[], %(tasks)b::text[], %(payloads)b::text[],
            %(run_ats)b::timestamptz[], %(delays)b::float8[], %(max_attempts)b::int[],
            %(priorities)b::int[], %(groups)b::text[], %(rate_keys)b::text[])
     WITH ORDINALITY AS x(i, q, t, p, r, d, m, pr, g, k, n)
ORDER BY n
RETURNING id, queue, run_at;"""

JOB_INSERT_MANY_UNIQUE: Final = """\
-- job_insert_many_unique: Inserts many jobs with distinct unique keys from parallel arrays (a NULL array: every job has the one value given beside it), skipping each key a waiting, queued or running job holds; returns the inserted jobs with their keys; one trace context for the whole batch.
-- No conflict target: naming the live-key index (jobs_unique_live_idx) would read its predicate's
-- column, status, which pgkick_producer may not read. Its only other unique index is the id's,
-- which a sequence fills, so the skip is the live key's.
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts, priority, group_key, unique_key,
                         traceparent, tracestate, rate_key)
SELECT coalesce(q, %(queue)s::text), coalesce(t, %(task)s::text), p::jsonb,
       coalesce(r, %(run_at)s::timestamptz,
                coalesce(%(now)s::timestamptz, now())
                + make_interval(secs => coalesce(d, %(delay)s::float8))),
       coalesce(m, %(max_attempt)s::int), coalesce(pr, %(priority)s::int),
       coalesce(g, %(group)s::text), u, %(traceparent)s::text, %(tracestate)s::text,
       coalesce(k, %(rate_key)s::text)
FROM unnest(%(queues)b::text[], %(tasks)b::text[], %(payloads)b::text[],
            %(run_ats)b::timestamptz[], %(delays)b::float8[], %(max_attempts)b::int[],
            %(priorities)b::int[], %(groups)b::text[], %(unique_keys)b::text[], %(rate_keys)b::text[])
     WITH ORDINALITY AS x(q, t, p, r, d, m, pr, g, u, k, n)
ORDER BY n
ON CONFLICT DO NOTHING
RETURNING id, queue, run_at, unique_key;"""

JOB_INSERT_UNIQUE: Final = """\
-- job_insert_unique: Inserts one job unless a waiting, queued or running job holds its unique key; returns its id, queue and due time, or no row when the key is held (then job_get_latest_by_unique_keys, in a later statement, sees the holder).
-- No conflict target: naming the live-key index (jobs_unique_live_idx) would read its predicate's
-- column, status, which pgkick_producer may not read. Its only other unique index is the id's,
-- which a sequence fills, so the skip is the live key's.
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts, priority, group_key, unique_key,
                         traceparent, tracestate, rate_key)
VALUES (%(queue)s, %(task)s, %(payload)s::jsonb,
        coalesce(%(run_at)s::timestamptz,
                 coalesce(%(now)s::timestamptz, now()) + %(delay)s::interval),
        %(max_attempts)s, %(priority)s, %(group_key)s, %(unique_key)s,
        %(traceparent)s, %(tracestate)s, %(rate_key)s)
ON CONFLICT DO NOTHING
RETURNING id, queue, run_at;"""

JOB_LAPSED_START: Final = """\
-- job_lapsed_start: Marks claimed suspects (jobs whose previous attempt's lease lapsed, migration 0035) started, just before they run: fenced, each by its attempt, while running; clears lapsed, so if this attempt's lease lapses too the reaper charges it. Returns the ids still held: a job missing was taken over, and must not start.
UPDATE pgkick.jobs AS j
SET lapsed = false
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempts)
WHERE j.id = held.id AND j.attempts = held.attempts AND j.status = 'running'
RETURNING j.id;"""

JOB_LEASE_LATEST_IN_QUEUE: Final = """\
-- job_lease_latest_in_queue: The latest lease expiry among a queue's running jobs (a rescue that finds leases not yet expired comes back then).
SELECT max(locked_until) FROM pgkick.jobs WHERE queue = %(queue)s AND status = 'running';"""

JOB_LIST_PAGE: Final = """\
-- job_list_page: One page of jobs, newest first: ids below the cursor (after) and at or above the floor (a bound on how many ids a page may look at), filtered by status, task, queue, unique key, group, created range and error text (the same filters a bulk retry, cancel or purge takes); for `pgkick jobs` and the dashboard (keyset paging on the primary key or a partial index, never a count).
SELECT id, queue, task, status, attempts, max_attempts, priority, unique_key, group_key,
       run_at, created_at, claimed_at, finished_at, locked_until, last_error
FROM pgkick.jobs
WHERE (%(after)s::bigint IS NULL OR id < %(after)s::bigint)
  AND (%(floor)s::bigint IS NULL OR id >= %(floor)s::bigint)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(unique_key)s::text IS NULL OR unique_key = %(unique_key)s::text)
  AND (%(group_key)s::text IS NULL OR group_key = %(group_key)s::text)
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s::timestamptz)
  AND (%(error)s::text IS NULL OR strpos(lower(last_error), lower(%(error)s::text)) > 0)
ORDER BY id DESC
LIMIT %(limit)s::int;"""

JOB_LIST_SINCE: Final = """\
-- job_list_since: The jobs with an id above after (optionally of one task, one queue, one status), in id order, with payloads and statuses: what pgkick.testing's modes and assertions read, so a test sees only the jobs it made.
SELECT id, queue, task, payload, status, attempts, run_at
FROM pgkick.jobs
WHERE id > %(after)s::bigint
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
ORDER BY id;"""

JOB_OUTCOME: Final = """\
-- job_outcome: Reads one job's status, result and last error, for pgkick.result and pgkick.wait.
SELECT status, result, last_error
FROM pgkick.jobs
WHERE id = %(id)s;"""

JOB_PARENT_RESULTS: Final = """\
-- job_parent_results: The results of a job's parents that ended done (JobContext.parent_results), in id order.
SELECT p.id, p.result
FROM pgkick.job_dependencies d
JOIN pgkick.jobs p ON p.id = d.parent_id
WHERE d.child_id = %(id)s AND p.status = 'done'
ORDER BY p.id;"""

JOB_PARENTS_MISSING: Final = """\
-- job_parents_missing: Of the job ids given as parents (after=), those with no job in this schema: checked in the enqueue's transaction before its row is written, so an unknown parent writes nothing.
SELECT p
FROM unnest(%(ids)s::bigint[]) AS p
WHERE NOT EXISTS (SELECT 1 FROM pgkick.jobs j WHERE j.id = p)
ORDER BY p;"""

JOB_PURGE_FINISHED: Final = """\
-- job_purge_finished: Deletes up to batch done or failed jobs that finished more than retention ago; never queued or running ones, nor a parent one of whose dependants is not done (it may still run, or be retried, and read that parent's result; deleted, its link would go with it and the dependant run as if that parent had never been): that parent goes once its dependant finished, or once the failed dependant itself was purged; nor the newest job of a unique key while it is younger than the longest throttle (30 days, MAX_FLOW_PERIOD): a throttled enqueue answers with it, and purged, the key's next enqueue inside the period wrote a second job. Returns how many it deleted and whether any was a dependant (its parents may be purgeable now: the caller runs the next statement, so an old failed chain goes on one purge, dependants first, whatever the batch; job_purgeable_count counts it so).
WITH gone AS (
  DELETE FROM pgkick.jobs
  WHERE id IN (
    SELECT j.id FROM pgkick.jobs AS j
    WHERE j.status IN ('done', 'failed')
      AND j.finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
      AND NOT (j.has_dependants AND EXISTS (
        SELECT 1 FROM pgkick.job_dependencies AS d JOIN pgkick.jobs AS c ON c.id = d.child_id
        WHERE d.parent_id = j.id AND c.status <> 'done'))
      AND NOT (j.unique_key IS NOT NULL  -- a throttle's answer (job_insert_flow): the key's newest
               AND j.created_at > coalesce(%(now)s::timestamptz, now()) - interval '30 days'
               AND NOT EXISTS (SELECT 1 FROM pgkick.jobs AS n
                               WHERE n.unique_key = j.unique_key AND n.id > j.id))
    LIMIT %(batch)s
  )
  RETURNING EXISTS (SELECT 1 FROM pgkick.job_dependencies AS d WHERE d.child_id = jobs.id)
    AS dependant
)
SELECT count(*)::int, coalesce(bool_or(dependant), false) FROM gone;"""

JOB_PURGEABLE_COUNT: Final = """\
-- job_purgeable_count: How many done or failed jobs, by status, finished more than retention ago, as job_purge_finished's statements delete them one after another (`pgkick purge --older-than --dry-run`): a parent one of whose dependants is not done is left out, unless that dependant is itself a failed job old enough to go first, and not left itself (so an old failed chain counts whole); nor the newest job of a unique key younger than 30 days (the longest throttle answers with it).
WITH RECURSIVE kept AS (  -- parents that stay: a dependant not done that no purge takes
  SELECT d.parent_id AS id
  FROM pgkick.job_dependencies AS d JOIN pgkick.jobs AS c ON c.id = d.child_id
  WHERE c.status <> 'done'
    AND NOT (c.status = 'failed'
             AND c.finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
             AND NOT (c.unique_key IS NOT NULL  -- kept as a throttle's answer (below)
                      AND c.created_at > coalesce(%(now)s::timestamptz, now()) - interval '30 days'
                      AND NOT EXISTS (SELECT 1 FROM pgkick.jobs AS n
                                      WHERE n.unique_key = c.unique_key AND n.id > c.id)))
  UNION
  SELECT d.parent_id
  FROM kept AS k
  JOIN pgkick.jobs AS c ON c.id = k.id AND c.status <> 'done'
  JOIN pgkick.job_dependencies AS d ON d.child_id = k.id
)
SELECT j.status, count(*)::int
FROM pgkick.jobs AS j
WHERE j.status IN ('done', 'failed')
  AND j.finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
  AND NOT (j.has_dependants AND j.id IN (SELECT id FROM kept))
  AND NOT (j.unique_key IS NOT NULL  -- a throttle's answer (job_insert_flow): the key's newest
           AND j.created_at > coalesce(%(now)s::timestamptz, now()) - interval '30 days'
           AND NOT EXISTS (SELECT 1 FROM pgkick.jobs AS n
                           WHERE n.unique_key = j.unique_key AND n.id > j.id))
GROUP BY j.status
ORDER BY j.status;"""

JOB_READY_COUNT_BY_QUEUE: Final = """\
-- job_ready_count_by_queue: Counts the jobs a claim could take now in each queue (which queues need a worker); a queue without a rate or a concurrency: ungrouped ready jobs, plus one for each group with no running job whose head is ready (a blocked group's jobs do not count); a queue with a rate or a concurrency (job_ready_fair_count, migration 0014; only those queues pay for it): its ready jobs with neither key if its own rate bucket has room, plus one for each key with a ready job its rate and its group's concurrency admit now (a held queue is not kicked: the sweep books its wake-up); a paused queue has none.
WITH RECURSIVE groups AS (  -- every (queue, group) with queued jobs, one index probe each
  (SELECT queue, group_key FROM pgkick.jobs
   WHERE group_key IS NOT NULL AND status = 'queued'
   ORDER BY queue, group_key LIMIT 1)
  UNION ALL
  SELECT n.queue, n.group_key
  FROM groups g,
       LATERAL (SELECT j.queue, j.group_key FROM pgkick.jobs j
                WHERE (j.queue, j.group_key) > (g.queue, g.group_key)
                  AND j.group_key IS NOT NULL AND j.status = 'queued'
                ORDER BY j.queue, j.group_key LIMIT 1) n
),
claimable AS (
  SELECT queue, 1 AS ready FROM pgkick.jobs
  WHERE status = 'queued' AND group_key IS NULL
    AND run_at <= coalesce(%(now)s::timestamptz, now())
  UNION ALL
  SELECT g.queue, 1 FROM groups g
  WHERE NOT EXISTS (SELECT 1 FROM pgkick.jobs r
                    WHERE r.queue = g.queue AND r.group_key = g.group_key
                      AND r.status = 'running')
    AND (SELECT h.run_at FROM pgkick.jobs h  -- job_claim's head: first in the group's order
         WHERE h.queue = g.queue AND h.group_key = g.group_key AND h.status = 'queued'
         ORDER BY -h.priority, h.ordered_at, h.id LIMIT 1)
        <= coalesce(%(now)s::timestamptz, now())
),
plain AS (
  SELECT queue, count(*) AS ready
  FROM claimable c
  WHERE NOT EXISTS (SELECT 1 FROM pgkick.queue_limits p
                    WHERE p.queue = c.queue
                      AND (p.paused OR p.rate_limit IS NOT NULL OR p.concurrency IS NOT NULL))
  GROUP BY queue
),
limited AS (  -- job_ready_fair_count (migration 0014): job_claim_fair_ids's rules, read only
  SELECT l.queue,
         pgkick.job_ready_fair_count(l.queue, coalesce(%(now)s::timestamptz, now()), 2147483647)
           AS ready
  FROM pgkick.queue_limits l
  WHERE NOT l.paused AND (l.rate_limit IS NOT NULL OR l.concurrency IS NOT NULL)
)
SELECT queue, ready FROM plain
UNION ALL
SELECT queue, ready FROM limited WHERE ready > 0
ORDER BY queue;"""

JOB_READY_EXISTS: Final = """\
-- job_ready_exists: Says whether a queue has a job a claim could take now; a queue without a rate or a concurrency (the common case, one probe of queue_limits first): an ungrouped ready job among the first hundred in claim order (the cheap common answer), a ready head of a group with no running job (a loose index scan over its groups), or an ungrouped ready job further on; a queue with a rate or a concurrency (migration 0014): a ready job its key's rate and its group's concurrency admit now (job_ready_fair_count, migration 0014: a loose index scan over its keys, planned apart so this statement stays cheap to plan); a held job does not count, so a worker out of time hands over only for claimable work (the exit sweep books a held queue's wake-up); a paused queue has none.
SELECT CASE
  WHEN NOT EXISTS (SELECT 1 FROM pgkick.queue_limits p
                   WHERE p.queue = %(queue)s
                     AND (p.paused OR p.rate_limit IS NOT NULL OR p.concurrency IS NOT NULL))
  THEN (EXISTS (
         SELECT 1 FROM (SELECT group_key FROM pgkick.jobs
                        WHERE queue = %(queue)s AND status = 'queued'
                          AND run_at <= coalesce(%(now)s::timestamptz, now())
                        ORDER BY priority DESC, run_at LIMIT 100) AS first
         WHERE first.group_key IS NULL)
    OR EXISTS (
         WITH RECURSIVE groups AS (  -- the queue's groups with queued jobs, one index probe each
           (SELECT group_key FROM pgkick.jobs
            WHERE queue = %(queue)s AND group_key IS NOT NULL AND status = 'queued'
            ORDER BY group_key LIMIT 1)
           UNION ALL
           SELECT (SELECT j.group_key FROM pgkick.jobs j
                   WHERE j.queue = %(queue)s AND j.group_key > g.group_key
                     AND j.group_key IS NOT NULL AND j.status = 'queued'
                   ORDER BY j.group_key LIMIT 1)
           FROM groups g WHERE g.group_key IS NOT NULL
         )
         SELECT 1 FROM groups g
         WHERE g.group_key IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM pgkick.jobs r
                           WHERE r.queue = %(queue)s AND r.group_key = g.group_key
                             AND r.status = 'running')
           AND (SELECT h.run_at FROM pgkick.jobs h  -- job_claim's head: first in the group's order
                WHERE h.queue = %(queue)s AND h.group_key = g.group_key
                  AND h.status = 'queued'
                ORDER BY -h.priority, h.ordered_at, h.id LIMIT 1)
               <= coalesce(%(now)s::timestamptz, now())
       )
    OR EXISTS (
         SELECT 1 FROM pgkick.jobs
         WHERE queue = %(queue)s AND status = 'queued' AND group_key IS NULL
           AND run_at <= coalesce(%(now)s::timestamptz, now())))
  ELSE pgkick.job_ready_fair_count(%(queue)s, coalesce(%(now)s::timestamptz, now()), 1) > 0
END;"""

JOB_REAP_EXPIRED: Final = """\
-- job_reap_expired: Re-queues running jobs whose lease expired (all queues, or the one a rescue names), or fails them at max_attempts (or when an operator asked to cancel them) with a last_error saying so; every reaped job is then lapsed (a suspect: migration 0035). A job lapsed already, whose worker never marked it started (job_lapsed_start), is given its attempt back (max_attempts + 1, never past 1000, as `pgkick retry`; attempts, the fencing token, never goes back): it only sat in a batch whose worker vanished.
UPDATE pgkick.jobs
SET status       = CASE WHEN cancel_requested_at IS NOT NULL
                             OR (attempts >= max_attempts AND NOT (lapsed AND max_attempts < 1000))
                        THEN 'failed' ELSE 'queued' END,
    finished_at  = CASE WHEN cancel_requested_at IS NOT NULL
                             OR (attempts >= max_attempts AND NOT (lapsed AND max_attempts < 1000))
                        THEN coalesce(%(now)s::timestamptz, now()) END,
    max_attempts = CASE WHEN lapsed AND max_attempts < 1000 AND cancel_requested_at IS NULL
                        THEN max_attempts + 1 ELSE max_attempts END,
    lapsed       = true,
    locked_until = NULL,
    last_error   = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled by operator'
                        WHEN lapsed AND max_attempts < 1000
                        THEN format('lease expired before it started (attempt %%s given back)',
                                    attempts)
                        ELSE format('lease expired (attempt %%s of %%s)', attempts, max_attempts)
                   END
WHERE status = 'running' AND locked_until < coalesce(%(now)s::timestamptz, now())
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
RETURNING id, queue, status, attempts;"""

JOB_RELEASED_QUEUES: Final = """\
-- job_released_queues: The queues that jobs waiting on others entered in this transaction, newline-separated, NULL when none (migration 0017's transaction-local pgkick.released_queues): read after a statement that ended their parents (a cancel), before the commit, to kick them.
SELECT nullif(current_setting('pgkick.released_queues', true), '');"""

JOB_RETRY_BLOCKED_BY_PARENTS: Final = """\
-- job_retry_blocked_by_parents: For the failed jobs a retry would select (by ids, or by queue and task), each that waits for a parent, under policy fail or cancel, which is failed and not selected too: the job and that parent (retried alone it would run as if the parent had succeeded; the parent's retry revives it, migration 0019).
SELECT j.id, p.id AS parent
FROM pgkick.jobs AS j
JOIN pgkick.job_dependencies AS d ON d.child_id = j.id AND d.policy <> 'run anyway'
JOIN pgkick.jobs AS p ON p.id = d.parent_id AND p.status = 'failed'
WHERE j.status = 'failed'
  AND j.attempts < 1000
  AND (%(ids)s::bigint[] IS NULL OR j.id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
  AND (%(task)s::text IS NULL OR j.task = %(task)s)
  AND NOT (p.attempts < 1000
           AND (%(ids)s::bigint[] IS NULL OR p.id = ANY(%(ids)s::bigint[]))
           AND (%(queue)s::text IS NULL OR p.queue = %(queue)s)
           AND (%(task)s::text IS NULL OR p.task = %(task)s))
ORDER BY 1, 2;"""

JOB_RETRY_FAILED: Final = """\
-- job_retry_failed: Puts failed jobs (by ids, or by queue and task) back in the queue with more attempts, never more than 1000 in all (a job that used 1000 stays failed); attempts keep counting up, so fencing stays sound; a cancel mark and a lapsed lease's suspicion (migration 0035) are cleared. With `error` (a bulk retry's --error), only the jobs whose last error still contains that text (case-insensitive), checked on the row's latest version: one retried by someone else since it was selected and failed again with another error is left failed. A selected job that a parent's failure ended (its last_error says so, policy fail or cancel), whose failed parent this retry selects too, is left to that parent: migration 0019's trigger revives it as waiting, so it runs after its parent, not beside it. A job with parents still to finish waits for them again (waiting, counted), and one whose parent under fail or cancel is failed and not retried here stays failed (the CLI names that parent first: job_retry_blocked_by_parents).
WITH selected AS (
  SELECT j.id FROM pgkick.jobs AS j
  WHERE j.status = 'failed'
    AND j.attempts < 1000
    AND (%(ids)s::bigint[] IS NULL OR j.id = ANY(%(ids)s::bigint[]))
    AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
    AND (%(task)s::text IS NULL OR j.task = %(task)s)
    AND (%(error)s::text IS NULL OR strpos(lower(j.last_error), lower(%(error)s::text)) > 0)
    AND NOT (coalesce(j.last_error, '') ~ '^(cancelled: )?parent job [0-9]+ failed: ' AND EXISTS (
      SELECT 1
      FROM pgkick.job_dependencies d JOIN pgkick.jobs p ON p.id = d.parent_id
      WHERE d.child_id = j.id AND d.policy <> 'run anyway'
        AND p.status = 'failed'
        AND p.attempts < 1000
        AND (%(ids)s::bigint[] IS NULL OR p.id = ANY(%(ids)s::bigint[]))
        AND (%(queue)s::text IS NULL OR p.queue = %(queue)s)
        AND (%(task)s::text IS NULL OR p.task = %(task)s)
        AND (%(error)s::text IS NULL OR strpos(lower(p.last_error), lower(%(error)s::text)) > 0)
    ))
), parents AS (
  -- Their parents, locked in id order before they are counted and read as locked (the
  -- latest version): none finishes between this count and this commit (its completion
  -- then finds the job waiting, and counts it off), as migration 0019's revival does.
  SELECT p.id, p.status FROM pgkick.jobs AS p
  WHERE p.id IN (SELECT d.parent_id FROM pgkick.job_dependencies AS d
                 WHERE d.child_id IN (SELECT selected.id FROM selected))
  ORDER BY p.id
  FOR SHARE
), counted AS (
  SELECT d.child_id,
         count(*) FILTER (WHERE pa.status NOT IN ('done', 'failed'))::int AS pending,
         bool_or(d.policy <> 'run anyway' AND pa.status = 'failed') AS blocked
  FROM pgkick.job_dependencies AS d JOIN parents AS pa ON pa.id = d.parent_id
  WHERE d.child_id IN (SELECT selected.id FROM selected)
  GROUP BY d.child_id
)
UPDATE pgkick.jobs AS j
SET status       = CASE WHEN coalesce(c.pending, 0) > 0 THEN 'waiting' ELSE 'queued' END,
    waiting_on   = coalesce(c.pending, 0),
    run_at       = coalesce(%(now)s::timestamptz, now()),
    finished_at  = NULL,
    max_attempts = least(j.attempts + %(extra_attempts)s::int, 1000),
    cancel_requested_at = NULL,  -- a job cancelled while running may be retried: a fresh start
    lapsed       = false  -- and no longer a suspect (migration 0035)
FROM selected AS s LEFT JOIN counted AS c ON c.child_id = s.id
WHERE j.id = s.id AND NOT coalesce(c.blocked, false)
  AND j.status = 'failed'  -- re-checked on the row's latest version: a concurrent retry or claim wins
  AND (%(error)s::text IS NULL OR strpos(lower(j.last_error), lower(%(error)s::text)) > 0)
RETURNING j.id, j.queue;"""

JOB_RETRY_UNIQUE_CONFLICTS: Final = """\
-- job_retry_unique_conflicts: For the failed jobs a retry would select (by ids, or by queue and task), each whose unique key a waiting, queued or running job holds, or an earlier selected job shares, or a newer job outside the selection took since (done or failed): the job, its key, the job in the way and its status. A retry of it would break the one-live-job-per-key rule, or, for a newer job, the rule a duplicate's read-back relies on (job_get_latest_by_unique_keys: the newest job with a key is the one that may hold it).
WITH chosen AS (
  SELECT id, unique_key FROM pgkick.jobs
  WHERE status = 'failed'
    AND attempts < 1000
    AND unique_key IS NOT NULL
    AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
    AND (%(queue)s::text IS NULL OR queue = %(queue)s)
    AND (%(task)s::text IS NULL OR task = %(task)s)
)
SELECT c.id, c.unique_key, live.id AS holder, live.status
FROM chosen c
JOIN pgkick.jobs live
  ON live.unique_key = c.unique_key AND live.status IN ('waiting', 'queued', 'running')
UNION ALL
SELECT c.id, c.unique_key, other.id, 'shared'
FROM chosen c
JOIN chosen other ON other.unique_key = c.unique_key AND other.id < c.id
UNION ALL
SELECT c.id, c.unique_key, newer.id, 'newer ' || newer.status
FROM chosen c
JOIN pgkick.jobs newer
  ON newer.unique_key = c.unique_key AND newer.id > c.id AND newer.status IN ('done', 'failed')
WHERE newer.id NOT IN (SELECT chosen.id FROM chosen)
ORDER BY 1, 3;"""

JOB_REVIVABLE_COUNT: Final = """\
-- job_revivable_count: For the failed jobs a retry selects (ids), how many jobs outside them it would revive at most (the bulk retry's dry run): the dependants their failures ended (policy fail or cancel, a last_error naming a parent's failure), transitively, as migration 0019's trigger finds them; an upper bound, since one with another parent still failed stays failed.
WITH RECURSIVE ended (id) AS (
  SELECT d.child_id
  FROM pgkick.job_dependencies d JOIN pgkick.jobs c ON c.id = d.child_id
  WHERE d.parent_id = ANY(%(ids)s::bigint[]) AND d.policy <> 'run anyway'
    AND c.status = 'failed' AND c.last_error ~ '^(cancelled: )?parent job [0-9]+ failed: '
  UNION
  SELECT d.child_id
  FROM ended e
  JOIN pgkick.job_dependencies d ON d.parent_id = e.id
  JOIN pgkick.jobs c ON c.id = d.child_id
  WHERE d.policy <> 'run anyway'
    AND c.status = 'failed' AND c.last_error ~ '^(cancelled: )?parent job [0-9]+ failed: '
)
SELECT count(*)::int FROM ended WHERE id <> ALL(%(ids)s::bigint[]);"""

JOB_REVIVED_DEPENDANTS_COUNT: Final = """\
-- job_revived_dependants_count: How many dependants retries revived in this transaction (migration 0019's trigger adds them up in the transaction-local pgkick.revived_dependants; 0 when none): read after the retry, before its commit.
SELECT coalesce(nullif(current_setting('pgkick.revived_dependants', true), ''), '0')::int"""

JOB_SNOOZE: Final = """\
-- job_snooze: Puts a running job back in the queue at now + seconds without using an attempt (fenced: only while this attempt holds it), or, when a cancel was requested since the worker's last heartbeat, fails it 'cancelled by operator'; returns its status and when it is due.
UPDATE pgkick.jobs
SET status       = CASE WHEN cancel_requested_at IS NULL THEN 'queued' ELSE 'failed' END,
    attempts     = CASE WHEN cancel_requested_at IS NULL THEN attempts - 1 ELSE attempts END,
    run_at       = CASE WHEN cancel_requested_at IS NULL
                        THEN coalesce(%(now)s::timestamptz, now()) + %(seconds)s * interval '1 second'
                        ELSE run_at END,
    finished_at  = CASE WHEN cancel_requested_at IS NULL THEN finished_at
                        ELSE coalesce(%(now)s::timestamptz, now()) END,
    last_error   = CASE WHEN cancel_requested_at IS NULL THEN last_error
                        ELSE 'cancelled by operator' END,
    locked_until = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING run_at, status;"""

JOB_START_PURGE_STALE: Final = """\
-- job_start_purge_stale: Deletes the rate-limit starts no window can count any more: older than two of their queue's periods, or of a queue that has no rate now (a claim prunes only the keys it starts, so a key never claimed again would keep its starts for ever).
DELETE FROM pgkick.job_starts s
WHERE NOT EXISTS (
  SELECT 1 FROM pgkick.queue_limits l
  WHERE l.queue = s.queue AND l.rate_period IS NOT NULL
    AND s.started_at > coalesce(%(now)s::timestamptz, now()) - 2 * l.rate_period
);"""

JOB_STATS_BY_QUEUE: Final = """\
-- job_stats_by_queue: Per queue: jobs by status, the oldest ready job's age, the next lease to expire, failures in the last day, whether it is paused, and ready jobs waiting past stranded_after with no worker watching (none in a paused queue: they wait for `pgkick resume`, not for a lost kick). A job is ready since its run_at, or since its last parent finished if later (a dependant released a moment ago keeps the run_at it was enqueued with: measured from it, the hours it waited on its parent read as hours ready, and fired OldestReadyJobAlarm).
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
               - min(greatest(run_at, released.at))
                   FILTER (WHERE status = 'queued'
                             AND run_at <= coalesce(%(now)s::timestamptz, now())))
                                                  AS oldest_ready_seconds,
       min(locked_until) FILTER (WHERE status = 'running') AS next_lease_expiry,
       coalesce((SELECT l.paused FROM pgkick.queue_limits l WHERE l.queue = jobs.queue), false)
                                                  AS paused,
       count(*) FILTER (WHERE status = 'queued'
                          AND greatest(run_at, released.at)
                              <= coalesce(%(now)s::timestamptz, now())
                                 - %(stranded_after)s::interval
                          AND NOT coalesce((SELECT l.paused FROM pgkick.queue_limits l
                                            WHERE l.queue = jobs.queue), false)
                          AND NOT EXISTS (
                            SELECT 1 FROM pgkick.queue_watchers w
                            WHERE w.queue = jobs.queue
                              AND w.until > coalesce(%(now)s::timestamptz, now())
                              AND w.until <= coalesce(%(now)s::timestamptz, now())
                                             + interval '2 hours'))
                                                  AS stranded
FROM pgkick.jobs
LEFT JOIN LATERAL (  -- a queued job's parents' last finish (one index probe; others: none)
  SELECT max(p.finished_at) AS at
  FROM pgkick.job_dependencies AS d JOIN pgkick.jobs AS p ON p.id = d.parent_id
  WHERE jobs.status = 'queued' AND d.child_id = jobs.id
) AS released ON true
GROUP BY queue
ORDER BY queue;"""

JOB_STEP_LIST: Final = """\
-- job_step_list: The steps a job finished (name, arguments' hash, result, duration, a sleep's seconds still to wait on the caller's clock), and whether its last continuation came before any step ran, with the time its invocation had left then (migration 0037): what a task's steps replay from; one row with a NULL name when it has none.
SELECT j.continued_stalled, j.continued_left_ms, s.name, s.args_hash, s.result, s.duration_ms,
       CASE WHEN s.wake_at IS NOT NULL  -- (greatest() would turn a step's NULL into 0)
            THEN greatest(extract(epoch FROM s.wake_at - coalesce(%(now)s::timestamptz, now())),
                          0)::float8
       END AS sleep_left
FROM pgkick.jobs AS j
LEFT JOIN pgkick.job_steps AS s ON s.job_id = j.id
WHERE j.id = %(id)s;"""

JOB_STEP_LIST_SHOWN: Final = """\
-- job_step_list_shown: A job's durable steps for an operator (`pgkick job ID`, the dashboard's job page), in the order they finished (by name within one instant): name, the attempt that wrote each, its duration, a sleep's end, and the stored result as JSON text cut to 200 characters (a step's result may be large); the first 100.
SELECT name, attempt, duration_ms, wake_at, created_at,
       left(result::text, 200) AS result,
       length(result::text) > 200 AS result_cut
FROM pgkick.job_steps
WHERE job_id = %(id)s
ORDER BY created_at, name
LIMIT 100;"""

JOB_STEP_RECORD: Final = """\
-- job_step_record: Stores one finished step's JSON result (or a sleep's end, now + sleep seconds) with its job, only while this attempt holds the job (fenced: the job row is share-locked and checked running under this attempt; 0 rows = the lease was lost, nothing written); returns the result as stored, which the first run hands back as a replay would read it.
INSERT INTO pgkick.job_steps (job_id, name, args_hash, result, attempt, duration_ms, wake_at,
                              created_at)
SELECT j.id, %(name)s, %(args_hash)s, %(result)s::jsonb, j.attempts, %(duration_ms)s,
       coalesce(%(now)s::timestamptz, now()) + %(sleep)s::float8 * interval '1 second',
       coalesce(%(now)s::timestamptz, now())
FROM pgkick.jobs AS j
WHERE j.id = %(id)s AND j.status = 'running' AND j.attempts = %(attempts)s
FOR SHARE OF j
ON CONFLICT (job_id, name) DO NOTHING
RETURNING result;"""

JOB_STEP_STALL_CLEAR: Final = """\
-- job_step_stall_clear: Clears a job's stall mark (its last continuation came before any step ran) once the step that mark let run whatever its estimate is stored, so only that one step ignores the estimate: a later run claimed late (after a sleep, a snooze, a retry) continues again instead of overrunning its invocation (fenced: only while this attempt holds the job; written only when the mark is set).
UPDATE pgkick.jobs
SET continued_stalled = false
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s AND continued_stalled;"""

JOB_TABLE_HEALTH: Final = """\
-- job_table_health: The jobs table's dead tuples and last (auto)vacuum, which the article says to watch.
SELECT n_live_tup, n_dead_tup, last_vacuum, last_autovacuum
FROM pg_stat_user_tables
WHERE relid = to_regclass(quote_ident(%(schema)s) || '.jobs');"""

JOB_WORKFLOW_LIST: Final = """\
-- job_workflow_list: The jobs of the workflow holding a job (pgkick.Workflow): those linked to it through job_dependencies, either way, and created by the same transaction, each with its parents among them, in id order.
WITH RECURSIVE anchor AS (
  SELECT id, created_at FROM pgkick.jobs WHERE id = %(id)s
), member(id) AS (
  SELECT id FROM anchor
  UNION
  SELECT j.id
  FROM member m
  CROSS JOIN LATERAL (
    SELECT d.child_id AS other FROM pgkick.job_dependencies d
    WHERE d.parent_id = m.id
    UNION ALL
    SELECT d.parent_id FROM pgkick.job_dependencies d
    WHERE d.child_id = m.id
  ) e
  JOIN pgkick.jobs j ON j.id = e.other
  WHERE j.created_at = (SELECT created_at FROM anchor)
)
SELECT j.id, j.task, j.queue, j.status, j.attempts, j.claimed_at, j.finished_at, j.last_error,
       array(SELECT d.parent_id FROM pgkick.job_dependencies d
             WHERE d.child_id = j.id
               AND d.parent_id IN (SELECT id FROM member)
             ORDER BY d.parent_id) AS parents
FROM pgkick.jobs j
WHERE j.id IN (SELECT id FROM member)
ORDER BY j.id;"""

MIGRATION_LIST_APPLIED: Final = """\
-- migration_list_applied: Lists the schema versions already applied, oldest first.
SELECT version FROM pgkick.pgkick_migrations ORDER BY version;"""

MIGRATION_LOCK: Final = """\
-- migration_lock: Serialises concurrent migrators until the end of the current transaction.
SELECT pg_advisory_xact_lock(hashtext('pgkick.migrate'));"""

MIGRATION_RECORD: Final = """\
-- migration_record: Records one applied schema version.
INSERT INTO pgkick.pgkick_migrations (version, name) VALUES (%(version)s, %(name)s);"""

MIGRATION_SEARCH_PATH_SET: Final = """\
-- migration_search_path_set: Points unqualified names at pgkick's schema (then any schemas listed after it) until the end of the migration's transaction: pooler-safe, nothing outlives the COMMIT.
SELECT set_config('search_path', %(path)s, true);"""

MIGRATION_TABLE_CREATE: Final = """\
-- migration_table_create: Creates the table that records which schema versions are applied.
CREATE TABLE IF NOT EXISTS pgkick.pgkick_migrations (
  version    int         PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);"""

MIGRATION_TABLE_EXISTS: Final = """\
-- migration_table_exists: Says whether pgkick's migrations table exists here, without creating anything.
SELECT to_regclass(quote_ident(%(schema)s) || '.pgkick_migrations') IS NOT NULL AS exists;"""

MIGRATION_TABLE_LEGACY: Final = """\
-- migration_table_legacy: The schema of a pgkick_migrations table the session's own search_path finds outside pgkick's schema, while pgkick's schema has none: an install from before 0006 (its tables in the role's default schema, usually public), to move, unless that ledger records 0006 (MigrationStore.ledger_elsewhere asks it): then another install, beside which the new one is made.
SELECT n.nspname AS legacy_schema
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass('pgkick_migrations')
  AND n.nspname <> %(schema)s
  AND to_regclass(quote_ident(%(schema)s) || '.pgkick_migrations') IS NULL;"""

PERIODIC_TICK_ENQUEUE: Final = """\
-- periodic_tick_enqueue: Records one periodic task's scheduled tick and inserts its job, in one statement; a tick already recorded (the scheduler delivered it again) inserts nothing.
WITH tick AS (
  INSERT INTO pgkick.periodic_ticks (name, tick_at)
  VALUES (%(name)s, %(tick_at)s)
  ON CONFLICT DO NOTHING
  RETURNING name
)
INSERT INTO pgkick.jobs (queue, task, payload, max_attempts)
SELECT %(queue)s, %(task)s, %(payload)s::jsonb, %(max_attempts)s
FROM tick
RETURNING id, queue, run_at;"""

PERIODIC_TICK_LATEST: Final = """\
-- periodic_tick_latest: Each periodic declaration's latest tick enqueued (the ticks table is purged after days: small), for the dashboard's recurring schedules.
SELECT name, max(tick_at) AS last_tick
FROM pgkick.periodic_ticks
GROUP BY name
ORDER BY name;"""

PERIODIC_TICK_PURGE: Final = """\
-- periodic_tick_purge: Deletes periodic ticks older than the retention, and never one younger than kept_at_least (as long as a tick can be delivered again: Scheduler's day of retries, Lambda's async queue, FailedKicksQueue's 14 days; pgkick.tasks.recurring.TICK_KEYS_KEPT).
DELETE FROM pgkick.periodic_ticks
WHERE tick_at < coalesce(%(now)s::timestamptz, now())
  - greatest(%(retention)s::interval, %(kept_at_least)s::interval);"""

QUEUE_FLOW_HELD: Final = """\
-- queue_flow_held: Says whether a queue's empty claim was its flow control's doing: the queue is paused, or it has a rate and ready jobs (held by the rate); a worker then leaves at once instead of lingering on it (its exit sweep books the rate's wake-up).
SELECT EXISTS (
  SELECT 1 FROM pgkick.queue_limits l
  WHERE l.queue = %(queue)s
    AND (l.paused
         OR (l.rate_limit IS NOT NULL
             AND EXISTS (SELECT 1 FROM pgkick.jobs j
                         WHERE j.queue = l.queue AND j.status = 'queued'
                           AND j.run_at <= coalesce(%(now)s::timestamptz, now())))));"""

QUEUE_HEAL_PLAN: Final = """\
-- queue_heal_plan: For each queue with queued jobs, the one wake-up to book for it (its earliest run_at still to come, or the earliest instant its rate admits a job a claim would take but for its rate) and whether it needs a kick: a job a claim could take now (a queue without a rate or a concurrency: ungrouped, or its group's head; with one: job_ready_fair_count, the claim's rules read only), nobody watching, nothing running (a running holder heals its own queue when it exits), not paused, and not the caller's own queue; those queues get a pending kick (as queue_kick_reserve marks one), so of racing callers exactly one kicks; the caller's own queue is only said to be unserved (ready, nobody watching, nothing running: its leaving worker claims it again, pgkick.worker.healing), and each row carries the statement's now (on the server's clock, as next_run_at).
WITH relaxed AS (
  -- A reservation lost in a crash costs one spare kick: its commit need not wait for the disk.
  SELECT set_config('synchronous_commit', 'off', true)
), heads AS (
  -- Each group's head, first in job_claim's order: a group is claimable only through it, so
  -- a ready job behind a head not due (or retrying) is not a reason to kick: two such
  -- queues' sweeps kicked each other's workers, which claimed nothing, until the head was due.
  SELECT DISTINCT ON (queue, group_key) queue, group_key, run_at
  FROM pgkick.jobs
  WHERE status = 'queued' AND group_key IS NOT NULL
  ORDER BY queue, group_key, -priority, ordered_at, id
), queued AS (
  SELECT j.queue,
         min(j.run_at) FILTER (WHERE j.run_at > coalesce(%(now)s::timestamptz, now())) AS next_run_at,
         bool_or(j.run_at <= coalesce(%(now)s::timestamptz, now()) AND j.group_key IS NULL)
           OR EXISTS (SELECT 1 FROM heads h
                      WHERE h.queue = j.queue AND h.run_at <= coalesce(%(now)s::timestamptz, now()))
           AS ready
  FROM pgkick.jobs j
  WHERE j.status = 'queued'
  GROUP BY j.queue
), rated AS (
  -- A queue with a rate (migration 0014): each rate key of a job a claim would take but for
  -- its rate (an ungrouped ready job, or a ready one among its group's first `concurrency`
  -- queued jobs (1 without one) less those running: job_claim_fair_ids's candidates) is
  -- admitted again once the newest rate_limit-th start of its window is a period old; the
  -- earliest such instant still to come is the queue's wake-up. A key of jobs no claim can
  -- take yet (a follower behind its group's head) is not one: its room said "now" and hid
  -- the held keys' instant (the wake-up fell back to the next run_at, or to none).
  SELECT l.queue,
         min(a.admit) FILTER (WHERE a.admit > coalesce(%(now)s::timestamptz, now())) AS admit
  FROM pgkick.queue_limits l,
       LATERAL (SELECT coalesce(j.rate_key, '') AS rate_key FROM pgkick.jobs j
                WHERE j.queue = l.queue AND j.status = 'queued' AND j.group_key IS NULL
                  AND j.run_at <= coalesce(%(now)s::timestamptz, now())
                UNION
                SELECT coalesce(f.rate_key, '')
                FROM heads g,
                     LATERAL (SELECT h.rate_key, h.run_at FROM pgkick.jobs h
                              WHERE h.queue = g.queue AND h.group_key = g.group_key
                                AND h.status = 'queued'
                              ORDER BY -h.priority, h.ordered_at, h.id
                              LIMIT greatest(coalesce(l.concurrency, 1)
                                             - (SELECT count(*) FROM pgkick.jobs r
                                                WHERE r.queue = g.queue
                                                  AND r.group_key = g.group_key
                                                  AND r.status = 'running'), 0)) f
                WHERE g.queue = l.queue
                  AND f.run_at <= coalesce(%(now)s::timestamptz, now())) k,
       LATERAL (SELECT CASE WHEN count(*) < l.rate_limit
                            THEN coalesce(%(now)s::timestamptz, now())
                            ELSE (array_agg(s.started_at ORDER BY s.started_at DESC))[l.rate_limit]
                                 + l.rate_period
                       END AS admit
                FROM pgkick.job_starts s
                WHERE s.queue = l.queue AND s.rate_key = k.rate_key
                  AND s.started_at > coalesce(%(now)s::timestamptz, now()) - l.rate_period) a
  WHERE l.rate_limit IS NOT NULL AND NOT l.paused
  GROUP BY l.queue
), planned AS (
  SELECT q.queue,
         CASE WHEN p.paused THEN q.next_run_at
              ELSE least(q.next_run_at, r.admit) END AS next_run_at,
         CASE WHEN coalesce(p.paused, false) THEN false
              -- the claim's rules (migration 0014), read only: a queue whose ready jobs are
              -- all held (by a key's rate, a group's concurrency or its head) is not kicked
              WHEN p.rate_limit IS NOT NULL OR p.concurrency IS NOT NULL
              THEN pgkick.job_ready_fair_count(q.queue, coalesce(%(now)s::timestamptz, now()), 1) > 0
              ELSE q.ready END AS ready
  FROM queued q
  LEFT JOIN rated r ON r.queue = q.queue
  LEFT JOIN pgkick.queue_limits p ON p.queue = q.queue
), unwatched AS (
  SELECT q.queue FROM planned q
  WHERE q.ready
    AND NOT EXISTS (SELECT 1 FROM pgkick.queue_watchers w
                    WHERE w.queue = q.queue AND w.until > coalesce(%(now)s::timestamptz, now())
                      -- never more than two hours ahead (queue_kick_reserve says why)
                      AND w.until <= coalesce(%(now)s::timestamptz, now()) + interval '2 hours')
    AND NOT EXISTS (SELECT 1 FROM pgkick.jobs r WHERE r.queue = q.queue AND r.status = 'running')
), reserved AS (
  INSERT INTO pgkick.queue_watchers AS w (queue, watcher, until)
  SELECT queue, 'kick', coalesce(%(now)s::timestamptz, now()) + %(pending)s::interval
  FROM unwatched, relaxed
  WHERE queue IS DISTINCT FROM %(skip)s::text
  ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until
    WHERE w.until <= coalesce(%(now)s::timestamptz, now())
       OR w.until > coalesce(%(now)s::timestamptz, now()) + interval '2 hours'
  RETURNING w.queue
)
SELECT q.queue, q.next_run_at, r.queue IS NOT NULL AS kick, u.queue IS NOT NULL AS unserved,
       coalesce(%(now)s::timestamptz, now()) AS swept_at
FROM planned q
LEFT JOIN reserved r ON r.queue = q.queue
LEFT JOIN unwatched u ON u.queue = q.queue
ORDER BY q.queue;"""

QUEUE_KICK_RELEASE: Final = """\
-- queue_kick_release: Removes a pending kick that could not be sent, so the next producer kicks instead of trusting it (migration 0027's function: the 'kick' row alone).
SELECT pgkick.queue_kick_release(%(queue)s);"""

QUEUE_KICK_RESERVE: Final = """\
-- queue_kick_reserve: Of the queues given, returns those that nobody watches and that are not paused, marking each with a pending kick; the caller kicks exactly those. A worker lingering on one of them with a channel is NOTIFYed (delivered at this commit). Through the SECURITY DEFINER function of migration 0027: a producer has no right on queue_watchers itself.
SELECT q FROM pgkick.queue_kick_reserve(%(queues)s::text[], %(pending)s::interval,
                                        %(now)s::timestamptz) AS q;"""

QUEUE_LIMIT_CLEAR: Final = """\
-- queue_limit_clear: Removes a queue's running limit (its rate, concurrency and pause stay; queue_limit_prune drops a row left empty).
UPDATE pgkick.queue_limits SET max_running = NULL WHERE queue = %(queue)s;"""

QUEUE_LIMIT_CONCURRENCY_SET: Final = """\
-- queue_limit_concurrency_set: Sets (or, with NULL, removes) how many jobs of one group key of a queue may run at once; set, the queue is claimed round-robin across its keys (migration 0014).
INSERT INTO pgkick.queue_limits (queue, concurrency) VALUES (%(queue)s, %(concurrency)s)
ON CONFLICT (queue) DO UPDATE SET concurrency = excluded.concurrency;"""

QUEUE_LIMIT_FLOW_GET: Final = """\
-- queue_limit_flow_get: A queue's rate and concurrency (NULLs: not set, or no row) and whether it has queued jobs, read before they change: a change that loosens a limit over queued jobs frees jobs the old limit held, and its caller kicks the queue.
SELECT l.rate_limit, l.rate_period, l.concurrency,
       EXISTS (SELECT 1 FROM pgkick.jobs j WHERE j.queue = q.queue AND j.status = 'queued')
         AS queued
FROM (SELECT %(queue)s::text AS queue) q
LEFT JOIN pgkick.queue_limits l ON l.queue = q.queue;"""

QUEUE_LIMIT_LIST: Final = """\
-- queue_limit_list: Every queue's limits (running, rate per period, concurrency per key, paused), with how many of its jobs run now.
SELECT l.queue, l.max_running,
       (SELECT count(*) FROM pgkick.jobs r WHERE r.queue = l.queue AND r.status = 'running') AS running,
       l.rate_limit, extract(epoch FROM l.rate_period)::float8 AS rate_period_seconds,
       l.concurrency, l.paused
FROM pgkick.queue_limits l
ORDER BY l.queue;"""

QUEUE_LIMIT_PRUNE: Final = """\
-- queue_limit_prune: Drops a queue's row once it limits nothing (no running limit, rate or concurrency, not paused), so its claims take the plain branch again; forgets its rate's starts and its round-robin cursor with it.
WITH dropped AS (
  DELETE FROM pgkick.queue_limits
  WHERE queue = %(queue)s AND max_running IS NULL AND rate_limit IS NULL
    AND concurrency IS NULL AND NOT paused
  RETURNING queue
), starts AS (
  DELETE FROM pgkick.job_starts s USING dropped d WHERE s.queue = d.queue
)
DELETE FROM pgkick.queue_claim_cursors c USING dropped d WHERE c.queue = d.queue;"""

QUEUE_LIMIT_RATE_SET: Final = """\
-- queue_limit_rate_set: Sets (or, with NULLs, removes) a queue's rate: at most rate_limit jobs of each rate key started per sliding rate_period (the claim enforces it, migration 0014).
INSERT INTO pgkick.queue_limits (queue, rate_limit, rate_period)
VALUES (%(queue)s, %(rate_limit)s, %(rate_period)s::interval)
ON CONFLICT (queue) DO UPDATE
SET rate_limit = excluded.rate_limit, rate_period = excluded.rate_period;"""

QUEUE_LIMIT_SET: Final = """\
-- queue_limit_set: Sets the most jobs of a queue that may run at once (the claim enforces it).
INSERT INTO pgkick.queue_limits (queue, max_running) VALUES (%(queue)s, %(max_running)s)
ON CONFLICT (queue) DO UPDATE SET max_running = excluded.max_running;"""

QUEUE_OVERVIEW: Final = """\
-- queue_overview: Per queue with queued, running or failed jobs or a row of limits: jobs ready now, jobs queued for later, running and failed jobs, the oldest ready job's age, its limits (running, rate per period, concurrency per key) and whether it is paused; read from the partial indexes of queued, running and failed jobs, never the finished history (the dashboard's queues).
WITH queued AS (
  SELECT queue,
         count(*) FILTER (WHERE run_at <= coalesce(%(now)s::timestamptz, now())) AS ready,
         count(*) FILTER (WHERE run_at > coalesce(%(now)s::timestamptz, now())) AS later,
         min(run_at) FILTER (WHERE run_at <= coalesce(%(now)s::timestamptz, now()))
           AS oldest_ready
  FROM pgkick.jobs WHERE status = 'queued' GROUP BY queue
),
running AS (
  SELECT queue, count(*) AS running FROM pgkick.jobs WHERE status = 'running' GROUP BY queue
),
failed AS (
  SELECT queue, count(*) AS failed FROM pgkick.jobs WHERE status = 'failed' GROUP BY queue
),
names AS (
  SELECT queue FROM queued UNION SELECT queue FROM running
  UNION SELECT queue FROM failed UNION SELECT queue FROM pgkick.queue_limits
)
SELECT n.queue,
       coalesce(q.ready, 0) AS ready,
       coalesce(q.later, 0) AS later,
       coalesce(r.running, 0) AS running,
       coalesce(f.failed, 0) AS failed,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - q.oldest_ready)
         AS oldest_ready_seconds,
       l.max_running,
       l.rate_limit,
       extract(epoch FROM l.rate_period)::float8 AS rate_period_seconds,
       l.concurrency,
       coalesce(l.paused, false) AS paused
FROM names n
LEFT JOIN queued q ON q.queue = n.queue
LEFT JOIN running r ON r.queue = n.queue
LEFT JOIN failed f ON f.queue = n.queue
LEFT JOIN pgkick.queue_limits l ON l.queue = n.queue
ORDER BY n.queue;"""

QUEUE_PAUSE_SET: Final = """\
-- queue_pause_set: Pauses or resumes a queue: a paused queue's claims take nothing and nobody kicks it (migration 0014).
INSERT INTO pgkick.queue_limits (queue, paused) VALUES (%(queue)s, %(paused)s)
ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused;"""

QUEUE_RESUME: Final = """\
-- queue_resume: Resumes a paused queue (its claims take jobs again); returns the queue, or no row when it was not paused (nothing written).
UPDATE pgkick.queue_limits SET paused = false
WHERE queue = %(queue)s AND paused
RETURNING queue;"""

QUEUE_WATCHER_ANNOUNCE: Final = """\
-- queue_watcher_announce: A worker says it is draining a queue until the given instant; it takes up the pending kick and clears expired watchers (and any more than two hours ahead: none of pgkick's).
WITH cleared AS (
  DELETE FROM pgkick.queue_watchers
  WHERE queue = %(queue)s
    AND (watcher = 'kick' OR until <= coalesce(%(now)s::timestamptz, now())
         -- a row more than two hours ahead is none of pgkick's (queue_kick_reserve says why)
         OR until > coalesce(%(now)s::timestamptz, now()) + interval '2 hours')
    AND watcher <> %(watcher)s
)
INSERT INTO pgkick.queue_watchers AS w (queue, watcher, until)
VALUES (%(queue)s, %(watcher)s, coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval)
ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until;"""

QUEUE_WATCHER_LISTEN: Final = """\
-- queue_watcher_listen: A lingering worker, already LISTENing, names its channel on its announcement until the given instant, so producers that find it NOTIFY it.
UPDATE pgkick.queue_watchers
SET channel = %(channel)s,
    listening_until = coalesce(%(now)s::timestamptz, now()) + %(window)s::interval
WHERE queue = %(queue)s AND watcher = %(watcher)s;"""

QUEUE_WATCHER_WITHDRAW: Final = """\
-- queue_watcher_withdraw: A worker leaving a queue removes its announcement (it then claims once more before it exits).
DELETE FROM pgkick.queue_watchers WHERE queue = %(queue)s AND watcher = %(watcher)s;"""

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

-- Every role reaches pgkick's tables through its schema (pgkick_maintainer by pgkick_worker).
GRANT USAGE ON SCHEMA pgkick TO pgkick_producer, pgkick_worker;

REVOKE ALL ON pgkick.jobs, pgkick.pgkick_migrations FROM PUBLIC;
GRANT SELECT ON pgkick.pgkick_migrations TO pgkick_producer, pgkick_worker;

-- The app: insert jobs, and read back only what the insert returns (never payloads or status).
GRANT INSERT (queue, task, payload, run_at, max_attempts, priority, group_key, unique_key,
              traceparent, tracestate)
  ON pgkick.jobs TO pgkick_producer;
GRANT SELECT (id, queue, run_at) ON pgkick.jobs TO pgkick_producer;
-- Unique keys: a skipped duplicate reads back the newest job with its key.
GRANT SELECT (unique_key) ON pgkick.jobs TO pgkick_producer;

-- Debounce and throttle (migration 0015): a function that may replace the payload of its
-- key's queued job and read the key's newest one, so the producer reads and updates nothing.
-- Workers call it too: a task enqueues its follow-ups on its worker's connection.
REVOKE ALL ON FUNCTION pgkick.job_insert_flow(text, text, jsonb, timestamptz, interval, int, int,
                                             text, text, text, text, interval, interval,
                                             interval, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_insert_flow(text, text, jsonb, timestamptz, interval, int,
                                                int, text, text, text, text, interval,
                                                interval, interval, timestamptz)
  TO pgkick_producer, pgkick_worker;

-- Workers: claim, complete, fail, extend.
GRANT SELECT ON pgkick.jobs TO pgkick_worker;
GRANT UPDATE (status, attempts, run_at, locked_until, last_error, finished_at, claimed_at,
               result)
  ON pgkick.jobs TO pgkick_worker;

-- The claim, the complete and the round trip are functions (migrations 0007, 0010, 0008), run
-- with their caller's rights: only workers call them.
REVOKE ALL ON FUNCTION pgkick.job_claim(text, int, interval, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_claim(text, int, interval, timestamptz) TO pgkick_worker;
REVOKE ALL ON FUNCTION pgkick.job_complete(bigint[], int[], text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_complete(bigint[], int[], text[], timestamptz)
  TO pgkick_worker;
REVOKE ALL ON FUNCTION pgkick.job_complete_and_claim(bigint[], int[], text[], text, int, interval,
                                                    timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_complete_and_claim(bigint[], int[], text[], text, int, interval,
                                                        timestamptz) TO pgkick_worker;

-- Jobs that wait for others (migration 0017): producers and spawning tasks link a job to its
-- parents through job_await (SECURITY DEFINER: it flags and reads parents they may not);
-- workers read parents' results and the dependants their failures released, and insert the
-- children a task spawns with every option an app's enqueue has, with ids reserved from the
-- jobs' sequence while the task ran (pgkick.worker.spawn: the insert commits with the
-- spawning job's completion, and the task has named the ids already).
REVOKE ALL ON pgkick.job_dependencies FROM PUBLIC;
GRANT SELECT ON pgkick.job_dependencies TO pgkick_worker;
REVOKE ALL ON FUNCTION pgkick.job_await(bigint[], bigint[], text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_await(bigint[], bigint[], text[], timestamptz)
  TO pgkick_producer, pgkick_worker;
GRANT INSERT (id, run_at, priority, group_key, unique_key, traceparent, tracestate, rate_key)
  ON pgkick.jobs TO pgkick_worker;
GRANT USAGE ON SEQUENCE pgkick.jobs_id_seq TO pgkick_worker;

-- The reaper and operators: also retry (more attempts), purge and cancel.
GRANT UPDATE (max_attempts, cancel_requested_at), DELETE ON pgkick.jobs TO pgkick_maintainer;

-- Periodic tasks: a scheduled tick inserts its job from the worker (pgkick.periodic); the
-- reaper purges old ticks.
REVOKE ALL ON pgkick.periodic_ticks FROM PUBLIC;
GRANT SELECT, INSERT ON pgkick.periodic_ticks TO pgkick_worker;
GRANT INSERT (queue, task, payload, max_attempts) ON pgkick.jobs TO pgkick_worker;
GRANT DELETE ON pgkick.periodic_ticks TO pgkick_maintainer;

-- Who watches which queue: workers announce, listen and withdraw there. Producers have no
-- right on the table (one set up before migration 0027 loses its rights here too).
REVOKE ALL ON pgkick.queue_watchers FROM PUBLIC, pgkick_producer;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgkick.queue_watchers TO pgkick_worker;

-- Producers and workers reserve and release kicks through two functions (migration 0027)
-- that write a reservation's row and no other, with the server's clock, for an hour at most.
REVOKE ALL ON FUNCTION pgkick.queue_kick_reserve(text[], interval, timestamptz),
                       pgkick.queue_kick_release(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.queue_kick_reserve(text[], interval, timestamptz),
                          pgkick.queue_kick_release(text)
  TO pgkick_producer, pgkick_worker;

-- Per-queue running limits: workers read them in every claim; operators set them.
REVOKE ALL ON pgkick.queue_limits FROM PUBLIC;
GRANT SELECT ON pgkick.queue_limits TO pgkick_worker;
GRANT INSERT, UPDATE, DELETE ON pgkick.queue_limits TO pgkick_maintainer;

-- Flow control (migration 0014): a producer names rate keys and kicks no paused queue
-- (queue_kick_reserve reads the flag); the claim records starts and where its round robin
-- left off, and a sweep reads the starts.
GRANT INSERT (rate_key) ON pgkick.jobs TO pgkick_producer;
GRANT SELECT (queue, paused) ON pgkick.queue_limits TO pgkick_producer;
REVOKE ALL ON pgkick.job_starts, pgkick.queue_claim_cursors FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON pgkick.job_starts TO pgkick_worker;
GRANT SELECT, INSERT, UPDATE ON pgkick.queue_claim_cursors TO pgkick_worker;
GRANT DELETE ON pgkick.queue_claim_cursors TO pgkick_maintainer;

-- Durable steps (migration 0018): workers read and write a job's steps, and count its
-- continuations (and a stalled one's time left, 0037); the purge deletes them with their job (ON DELETE CASCADE).
REVOKE ALL ON pgkick.job_steps FROM PUBLIC;
GRANT SELECT, INSERT ON pgkick.job_steps TO pgkick_worker;
GRANT UPDATE (continued, continued_stalled, continued_left_ms) ON pgkick.jobs TO pgkick_worker;

-- Suspects (migration 0035): a worker marks one started (lapsed); its rescue reaps as the
-- worker, and gives a suspect that never started its attempt back (max_attempts + 1).
GRANT UPDATE (lapsed, max_attempts) ON pgkick.jobs TO pgkick_worker;

-- Operators cancel waiting jobs too (migration 0017): the cancel clears a job's count of
-- parents, waiting_on (without it, no cancel by pgkick_maintainer ran at all).
GRANT UPDATE (waiting_on) ON pgkick.jobs TO pgkick_maintainer;"""

ROLE_SETUP_DONE: Final = """\
-- role_setup_done: Whether pgkick's three roles exist here, set up by an earlier `pgkick migrate --roles` (a later migrate then grants them what its new migrations need).
SELECT count(*) = 3
FROM pg_catalog.pg_roles
WHERE rolname IN ('pgkick_producer', 'pgkick_worker', 'pgkick_maintainer');"""

SCHEMA_CREATE: Final = """\
-- schema_create: Creates the schema that holds every pgkick object, if it is missing (the migrator owns it).
CREATE SCHEMA IF NOT EXISTS pgkick;"""

SESSION_BACKEND_PID: Final = """\
-- session_backend_pid: The server process this statement ran in: a pooler between client and server shows as a pid other than the one the connection was opened with.
SELECT pg_backend_pid();"""

SESSION_REAP_PRIVILEGES_MISSING: Final = """\
-- session_reap_privileges_missing: The tables the session's role may not delete from that the reaper's purges do (the jobs, the periodic ticks: pgkick_maintainer may, pgkick_worker not), with the role's name; no row: it may reap.
SELECT current_user::text, quote_ident(%(schema)s) || '.' || t.name
FROM (VALUES ('jobs'), ('periodic_ticks')) AS t(name)
WHERE NOT has_table_privilege(quote_ident(%(schema)s) || '.' || t.name, 'DELETE')
ORDER BY t.name;"""

TRANSACTION_BEGIN: Final = """\
-- transaction_begin: Opens an explicit transaction inside a pipeline, so a COMMIT can end it before the statements that must see it committed.
BEGIN;"""

TRANSACTION_COMMIT: Final = """\
-- transaction_commit: Commits the transaction transaction_begin opened; statements after it in the pipeline run in a new one.
COMMIT;"""

TRANSACTION_JOIN: Final = """\
-- transaction_join: Nothing but a statement, sent on an app's connection that is not autocommit and has no transaction yet: psycopg opens the app's transaction (its BEGIN) before it, so pgkick's statements and savepoints that follow are the app's, kept or rolled back with its next commit() or rollback().
SELECT 1;"""

TRANSACTION_NOW: Final = """\
-- transaction_now: The instant the statements of the current transaction see as now() (or the caller's clock, %(now)s): where enqueue_many's jobs without a run_at are due, plus their delay.
SELECT coalesce(%(now)s::timestamptz, now());"""

# The migrations' versions in the order they apply (their scripts:
# pgkick.store.migration_scripts, which a Lambda handler never loads).
MIGRATION_VERSIONS: Final[tuple[int, ...]] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37,)
