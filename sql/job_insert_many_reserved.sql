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
RETURNING id, queue, run_at;
