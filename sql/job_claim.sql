-- job_claim: Claims up to batch ready jobs of a queue, highest priority first then run_at, under a lease, skipping rows other workers hold (FOR UPDATE SKIP LOCKED); grouped jobs (one running per group: its head in claim order, or its job waiting for a retry) and limited queues (at most the limit's room) under the queue's claim lock: one statement, the server-side function of migration 0007 (pgkick.groups).
SELECT id, queue, task, payload, attempts, max_attempts
FROM pgkick.job_claim(%(queue)s::text, %(batch)s::int, %(lease)s::interval, %(now)s::timestamptz);
