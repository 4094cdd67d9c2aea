-- job_complete_many: Marks a batch of running jobs done in one statement, each fenced by its own attempt, storing each one's result (JSON text or NULL): the server-side job_complete of migration 0010; returns the ids still held.
SELECT id
FROM pgkick.job_complete(%(ids)s::bigint[], %(attempts)s::int[], %(results)s::text[],
                         %(now)s::timestamptz);
