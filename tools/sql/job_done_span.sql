-- job_done_span: How many jobs are done and the seconds from the first claim to the last finish (the pipelined ceiling's time: neither pgbench's connecting nor its rounds on an empty queue).
SELECT count(*) AS done,
       coalesce(extract(epoch FROM max(finished_at) - min(claimed_at)), 0)::float8 AS seconds
FROM pgkick.jobs
WHERE status = 'done';
