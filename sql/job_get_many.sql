-- job_get_many: Reads jobs by id, for the CLI and the demo's report.
SELECT id, queue, task, status, attempts, max_attempts, run_at, locked_until, last_error,
       created_at, claimed_at, finished_at
FROM pgkick.jobs
WHERE id = ANY(%(ids)s::bigint[])
ORDER BY id;
