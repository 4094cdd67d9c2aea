-- job_finished_since: How many jobs are done and the seconds from since until the last one finished (the pipelined ceiling's time, not counting its rounds on an empty queue).
SELECT count(*) AS done,
       coalesce(extract(epoch FROM max(finished_at) - %(since)s::timestamptz), 0)::float8 AS seconds
FROM jobs
WHERE status = 'done';
