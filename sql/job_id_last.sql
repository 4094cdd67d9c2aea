-- job_id_last: The highest job id in the table, 0 when it is empty: where the jobs of a pgkick.testing block begin.
SELECT coalesce(max(id), 0) FROM pgkick.jobs;
