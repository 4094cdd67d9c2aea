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
RETURNING id, queue, run_at, unique_key;
