-- job_insert_flow: Enqueues one debounced or throttled job through pgkick.job_insert_flow (migration 0015): the job inserted, or its key's queued job with the new payload and due time (debounce), or the job holding the key for the period (throttle); touched says whether anything was written.
SELECT id, queue, run_at, touched
FROM pgkick.job_insert_flow(%(queue)s, %(task)s, %(payload)s::jsonb, %(run_at)s::timestamptz,
                            %(delay)s::interval, %(max_attempts)s, %(priority)s, %(group_key)s,
                            %(unique_key)s, %(traceparent)s, %(tracestate)s,
                            %(debounce)s::interval, %(max_delay)s::interval,
                            %(throttle)s::interval, %(now)s::timestamptz);
