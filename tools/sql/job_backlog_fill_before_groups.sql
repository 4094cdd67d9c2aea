-- job_backlog_fill_before_groups: Fills a queue with count ready jobs, due a millisecond apart in the past, in a jobs table as it was before migration 0004.
INSERT INTO pgkick.jobs (queue, task, payload, run_at)
SELECT 'default', 'noop', '{}', now() - interval '1 day' + n * interval '1 millisecond'
FROM generate_series(1, %(count)s::int) AS n;
