-- job_delete_finished_among: Deletes the jobs among ids that still match the bulk purge's selection as each row is deleted (its latest version): a status among the selection's statuses (done or failed), and a last error containing the selection's text if it has one (case-insensitive), the two filtered columns a job can change once selected (queue, task, keys, group and created_at never change), so a job retried and run to done, or failed again with another error, since it was counted is left alone; returns their ids.
DELETE FROM pgkick.jobs
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('done', 'failed')
  AND status = ANY(%(statuses)s::text[])
  AND (%(error)s::text IS NULL OR strpos(lower(last_error), lower(%(error)s::text)) > 0)
RETURNING id;
