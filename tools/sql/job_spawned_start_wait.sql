-- job_spawned_start_wait: Each finished child of the dependencies benchmark's fan-out and the ms from its row's creation (its spawner's completion transaction, where a spawned job is written) to its claim.
SELECT extract(epoch FROM claimed_at - created_at) * 1000 AS wait_ms
FROM pgkick.jobs
WHERE task = 'bench_fan_child' AND status = 'done';
