-- job_count_by_status: Counts jobs by status with the most attempts any took (the article's table).
SELECT status, count(*) AS count, max(attempts) AS max_attempts FROM pgkick.jobs GROUP BY status ORDER BY status;
