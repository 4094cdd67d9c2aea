-- job_insert_many: Inserts many queued jobs in one round trip from parallel arrays (binary; delays in seconds), returning ids in input order.
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts)
SELECT q, t, p::jsonb,
       coalesce(r, coalesce(%(now)s::timestamptz, now()) + make_interval(secs => d)),
       m
FROM unnest(%(queues)b::text[], %(tasks)b::text[], %(payloads)b::text[],
            %(run_ats)b::timestamptz[], %(delays)b::float8[], %(max_attempts)b::int[])
     WITH ORDINALITY AS x(q, t, p, r, d, m, n)
ORDER BY n
RETURNING id, queue, run_at;
