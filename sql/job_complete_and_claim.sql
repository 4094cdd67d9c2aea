-- job_complete_and_claim: Completes a worker's last batch (fenced, each job by its attempt, with its result) and then claims the next: one statement, the server-side function of migration 0008; rows with a NULL task are the completed ids still held, then the claimed jobs (with job_claim's trace context, its times if timed, its lapsed flag, migration 0035, and if timed its release, migration 0037); the last column, on the completed ids' rows, the queues their dependants entered (migration 0017), NULL when none.
SELECT id, queue, task, payload, attempts, max_attempts, traceparent, tracestate,
       CASE WHEN %(timed)s::bool THEN enqueued_at END,
       CASE WHEN %(timed)s::bool THEN run_at END,
       CASE WHEN %(timed)s::bool THEN claimed_at END, lapsed,
       CASE WHEN %(timed)s::bool THEN released_at END,
       CASE WHEN task IS NULL THEN nullif(current_setting('pgkick.released_queues', true), '') END
FROM pgkick.job_complete_and_claim(%(ids)s::bigint[], %(attempts)s::int[], %(results)s::text[],
                                   %(queue)s::text, %(batch)s::int, %(lease)s::interval,
                                   %(now)s::timestamptz);
