-- procrastinate_job_reset: Empties procrastinate's jobs (and their events) between benchmark runs of that peer (benchmarks only).
TRUNCATE procrastinate_jobs CASCADE;
