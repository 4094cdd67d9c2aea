-- job_outcome: Reads one job's status, result and last error, for pgkick.result and pgkick.wait.
SELECT status, result, last_error
FROM pgkick.jobs
WHERE id = %(id)s;
