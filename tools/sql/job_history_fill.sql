-- job_history_fill: Adds count finished jobs of history (done a day ago), to measure the claim on a long-lived table.
INSERT INTO pgkick.jobs (queue, task, payload, status, run_at, attempts, finished_at, created_at)
SELECT 'default', 'noop', '{}', 'done', now() - interval '1 day', 1,
       now() - interval '1 day', now() - interval '1 day'
FROM generate_series(1, %(count)s);
