-- procrastinate_job_count_by_status: Counts procrastinate's jobs by status, to check a peer's drain ran every job.
SELECT status::text, count(*) AS count FROM procrastinate_jobs GROUP BY status ORDER BY status;
