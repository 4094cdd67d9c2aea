-- job_insert_many: Inserts many queued jobs in one round trip from parallel arrays (binary; delays in seconds), returning ids in input order; one trace context for the whole batch (its enqueue_many's).
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts, priority, group_key,
                         traceparent, tracestate, rate_key)
SELECT q, t, p::jsonb,
       coalesce(r, coalesce(%(now)s::timestamptz, now()) + make_interval(secs => d)),
       m, pr, g, %(traceparent)s::text, %(tracestate)s::text, k
FROM unnest(%(queues)b::text[], %(tasks)b::text[], %(payloads)b::text[],
            %(run_ats)b::timestamptz[], %(delays)b::float8[], %(max_attempts)b::int[],
            %(priorities)b::int[], %(groups)b::text[], %(rate_keys)b::text[])
     WITH ORDINALITY AS x(q, t, p, r, d, m, pr, g, k, n)
ORDER BY n
RETURNING id, queue, run_at;
