-- job_table_any_row: Whether the jobs table holds any job at all (bench and demo refuse a database whose jobs are not theirs).
SELECT EXISTS (SELECT FROM pgkick.jobs) AS any_job;
