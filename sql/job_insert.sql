-- job_insert: Inserts one queued job, due at run_at or after delay, and returns its id, queue and due time.
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts, priority, group_key,
                         traceparent, tracestate, rate_key)
VALUES (%(queue)s, %(task)s, %(payload)s::jsonb,
        coalesce(%(run_at)s::timestamptz,
                 coalesce(%(now)s::timestamptz, now()) + %(delay)s::interval),
        %(max_attempts)s, %(priority)s, %(group_key)s, %(traceparent)s, %(tracestate)s,
        %(rate_key)s)
RETURNING id, queue, run_at;
