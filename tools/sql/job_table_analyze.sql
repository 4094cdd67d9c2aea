-- job_table_analyze: Refreshes the planner's statistics of the jobs table after a bulk load.
ANALYZE pgkick.jobs;
