-- job_insert_unique: Inserts one job unless a waiting, queued or running job holds its unique key; returns its id, queue and due time, or no row when the key is held (then job_get_latest_by_unique_keys, in a later statement, sees the holder).
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts, priority, group_key, unique_key,
                         traceparent, tracestate, rate_key)
VALUES (%(queue)s, %(task)s, %(payload)s::jsonb,
        coalesce(%(run_at)s::timestamptz,
                 coalesce(%(now)s::timestamptz, now()) + %(delay)s::interval),
        %(max_attempts)s, %(priority)s, %(group_key)s, %(unique_key)s,
        %(traceparent)s, %(tracestate)s, %(rate_key)s)
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND status IN ('waiting', 'queued', 'running')
DO NOTHING
RETURNING id, queue, run_at;
