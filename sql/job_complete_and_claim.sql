-- job_complete_and_claim: Completes a worker's last batch (fenced, each job by its attempt, with its result) and then claims the next: one statement, the server-side function of migration 0008; rows with a NULL task are the completed ids still held, then the claimed jobs.
SELECT id, queue, task, payload, attempts, max_attempts
FROM pgkick.job_complete_and_claim(%(ids)s::bigint[], %(attempts)s::int[], %(results)s::text[],
                                   %(queue)s::text, %(batch)s::int, %(lease)s::interval,
                                   %(now)s::timestamptz);
