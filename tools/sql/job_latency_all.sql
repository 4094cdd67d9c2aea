-- job_latency_all: Each job's status, attempts and wait from commit to claim in ms (the kicks benchmark's check).
SELECT status, attempts,
       extract(epoch FROM claimed_at - created_at) * 1000 AS wait_ms
FROM pgkick.jobs;
