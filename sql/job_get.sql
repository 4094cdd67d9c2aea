-- job_get: Reads one job whole (payload, result, attempts, last error, timestamps, lease, cancel mark, and its first 50 parents and dependants with how many parents it still waits on) with the instant it was read, for `pgkick job` and the dashboard's job page.
SELECT id, queue, task, status, payload, result, attempts, max_attempts, priority,
       unique_key, group_key, last_error, created_at, run_at, claimed_at, finished_at,
       locked_until, cancel_requested_at, coalesce(%(now)s::timestamptz, now()) AS read_at,
       waiting_on,
       ARRAY(SELECT d.parent_id FROM pgkick.job_dependencies d
             WHERE d.child_id = %(id)s::bigint ORDER BY d.parent_id LIMIT 50) AS parents,
       ARRAY(SELECT d.child_id FROM pgkick.job_dependencies d
             WHERE d.parent_id = %(id)s::bigint ORDER BY d.child_id LIMIT 50) AS dependants
FROM pgkick.jobs
WHERE id = %(id)s::bigint;
