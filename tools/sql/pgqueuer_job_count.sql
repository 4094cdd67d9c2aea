-- pgqueuer_job_count: Counts the jobs still in pgqueuer's queue table, to check a peer's drain ran every job.
SELECT count(*) AS count FROM pgqueuer;
