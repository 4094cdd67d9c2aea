-- job_latency_after_first_batch: Wait from commit to claim in ms of the jobs inserted after the first job finished (those a worker served once its first batch had run: its cold start and its first batch's start-up, the rescue's booking, behind it).
SELECT extract(epoch FROM claimed_at - created_at) * 1000 AS wait_ms
FROM pgkick.jobs
WHERE claimed_at IS NOT NULL
  AND created_at > (SELECT min(finished_at) FROM pgkick.jobs);
