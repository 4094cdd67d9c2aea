-- job_insert_unique: Inserts one job unless a waiting, queued or running job holds its unique key; returns its id, queue and due time, or no row when the key is held (then job_get_latest_by_unique_keys, in a later statement, sees the holder).
-- No conflict target: naming the live-key index (jobs_unique_live_idx) would read its predicate's
-- column, status, which pgkick_producer may not read. Its only other unique index is the id's,
-- which a sequence fills, so the skip is the live key's.
INSERT INTO pgkick.jobs (queue, task, payload, run_at, max_attempts, priority, group_key, unique_key,
                         traceparent, tracestate, rate_key)
VALUES (%(queue)s, %(task)s, %(payload)s::jsonb,
        coalesce(%(run_at)s::timestamptz,
                 coalesce(%(now)s::timestamptz, now()) + %(delay)s::interval),
        %(max_attempts)s, %(priority)s, %(group_key)s, %(unique_key)s,
        %(traceparent)s, %(tracestate)s, %(rate_key)s)
ON CONFLICT DO NOTHING
RETURNING id, queue, run_at;
