-- job_claim: Claims up to batch ready jobs of a queue, highest priority first then run_at, under a lease, skipping rows other workers hold (FOR UPDATE SKIP LOCKED); grouped jobs (one running per group: its head in claim order, or its job waiting for a retry) and limited queues (at most the limit's room) under the queue's claim lock: one statement, the server-side function of migration 0007 (pgkick.groups); each job with the trace context it was enqueued under and its enqueue, due and claim times (0012).
SELECT id, queue, task, payload, attempts, max_attempts, traceparent, tracestate, enqueued_at,
       run_at, claimed_at
FROM pgkick.job_claim(%(queue)s::text, %(batch)s::int, %(lease)s::interval, %(now)s::timestamptz);
