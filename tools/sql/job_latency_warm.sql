-- job_latency_warm: Wait from commit to claim in ms of the jobs inserted after the first claim (those a running worker served, not a cold start).
SELECT extract(epoch FROM claimed_at - created_at) * 1000 AS wait_ms
FROM pgkick.jobs
WHERE claimed_at IS NOT NULL
  AND created_at > (SELECT min(claimed_at) FROM pgkick.jobs);
