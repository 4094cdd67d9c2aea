-- job_complete_many: Marks a batch of running jobs done in one statement, each fenced by its own attempt, storing each one's result (JSON text or NULL): the server-side job_complete of migration 0010; returns the ids still held, each with the queues that jobs waiting on them entered (migration 0017's pgkick.released_queues, set in this statement's transaction; NULL when none).
SELECT id, nullif(current_setting('pgkick.released_queues', true), '')
FROM pgkick.job_complete(%(ids)s::bigint[], %(attempts)s::int[], %(results)s::text[],
                         %(now)s::timestamptz);
