-- job_claim: Claims up to batch ready jobs of a queue, highest priority first then run_at, under a lease, skipping rows other workers hold (FOR UPDATE SKIP LOCKED); grouped jobs (one running per group: its head in claim order, or its job waiting for a retry) and limited queues (at most the limit's room) under the queue's claim lock: one statement, the server-side function of migration 0007 (pgkick.groups); each job with the trace context it was enqueued under (0012) and, if timed (a worker that traces), its enqueue, due and claim times (three timestamps cost about 2 us a job to send and parse; NULLs nothing); and whether its previous attempt's lease lapsed (0035: a suspect, run last and marked started by job_lapsed_start); if timed, when its last parent released it (0037: a dependant's wait is measured from there).
SELECT id, queue, task, payload, attempts, max_attempts, traceparent, tracestate,
       CASE WHEN %(timed)s::bool THEN enqueued_at END,
       CASE WHEN %(timed)s::bool THEN run_at END,
       CASE WHEN %(timed)s::bool THEN claimed_at END, lapsed,
       CASE WHEN %(timed)s::bool THEN released_at END
FROM pgkick.job_claim(%(queue)s::text, %(batch)s::int, %(lease)s::interval, %(now)s::timestamptz);
