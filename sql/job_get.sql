-- job_get: Reads one job whole (payload, result, attempts, last error, timestamps, lease, cancel mark) with the instant it was read, for `pgkick job` and the dashboard's job page.
SELECT id, queue, task, status, payload, result, attempts, max_attempts, priority,
       unique_key, group_key, last_error, created_at, run_at, claimed_at, finished_at,
       locked_until, cancel_requested_at, coalesce(%(now)s::timestamptz, now()) AS read_at
FROM pgkick.jobs
WHERE id = %(id)s::bigint;
