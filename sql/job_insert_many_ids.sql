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
RETURNING id;
