-- job_delay_summary: The bench's quiet day with faults: how many jobs ended done, how many were claimed more than once, how many are still not done, and the worst wait from run_at to finish (seconds).
SELECT count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE attempts > 1) AS claimed_again,
       count(*) FILTER (WHERE status <> 'done') AS not_done,
       coalesce(max(extract(epoch FROM finished_at - run_at)), 0)::float AS worst_delay_s
FROM pgkick.jobs;
