-- job_insert_many_reserved: Inserts many queued jobs with ids reserved earlier (job_id_reserve) from parallel arrays (binary; delays in seconds), returning id, queue and due time in input order; one trace context for the whole batch (its spawn's): a spawning task's children, written in its completion's transaction.
INSERT INTO pgkick.jobs (id, queue, task, payload, run_at, max_attempts, priority, group_key,
                         traceparent, tracestate, rate_key)
OVERRIDING SYSTEM VALUE
SELECT i, q, t, p::jsonb,
       coalesce(r, coalesce(%(now)s::timestamptz, now()) + make_interval(secs => d)),
       m, pr, g, %(traceparent)s::text, %(tracestate)s::text, k
FROM unnest(%(ids)b::bigint[], %(queues)b::text[], %(tasks)b::text[], %(payloads)b::text[],
            %(run_ats)b::timestamptz[], %(delays)b::float8[], %(max_attempts)b::int[],
            %(priorities)b::int[], %(groups)b::text[], %(rate_keys)b::text[])
     WITH ORDINALITY AS x(i, q, t, p, r, d, m, pr, g, k, n)
ORDER BY n
RETURNING id, queue, run_at;
