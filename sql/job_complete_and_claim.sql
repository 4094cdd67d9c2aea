-- job_complete_and_claim: Completes a worker's last batch (fenced, each job by its attempt, with its result) and then claims the next: one statement, the server-side function of migration 0008; rows with a NULL task are the completed ids still held, then the claimed jobs (with job_claim's trace context and times).
SELECT id, queue, task, payload, attempts, max_attempts, traceparent, tracestate, enqueued_at,
       run_at, claimed_at
FROM pgkick.job_complete_and_claim(%(ids)s::bigint[], %(attempts)s::int[], %(results)s::text[],
                                   %(queue)s::text, %(batch)s::int, %(lease)s::interval,
                                   %(now)s::timestamptz);
