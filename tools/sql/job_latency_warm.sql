-- job_latency_warm: Wait from commit to claim in ms of the jobs inserted after the first claim (those a running worker served, not a cold start), each marked whether it was inserted after the first job finished too (once the worker's first batch had run: its rescue's booking behind it).
SELECT extract(epoch FROM j.claimed_at - j.created_at) * 1000 AS wait_ms,
       j.created_at > f.first_finish AS after_first_batch
FROM pgkick.jobs j,
     (SELECT min(claimed_at) AS first_claim, min(finished_at) AS first_finish
      FROM pgkick.jobs) f
WHERE j.claimed_at IS NOT NULL
  AND j.created_at > f.first_claim;
