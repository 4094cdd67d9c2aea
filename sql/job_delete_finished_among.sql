-- job_delete_finished_among: Deletes the jobs among ids that are done or failed (a job retried meanwhile is left alone); returns their ids.
DELETE FROM pgkick.jobs
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('done', 'failed')
RETURNING id;
