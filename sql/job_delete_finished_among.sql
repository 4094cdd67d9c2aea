-- job_delete_finished_among: Deletes the jobs among ids that still match the bulk purge's selection as each row is deleted (its latest version): a status among the selection's statuses (done or failed), and a last error containing the selection's text if it has one (case-insensitive), the two filtered columns a job can change once selected (queue, task, keys, group and created_at never change), so a job retried and run to done, or failed again with another error, since it was counted is left alone; as job_purge_finished, never a parent one of whose dependants is not done (the caller passes it again once that dependant went, if it was selected too); returns their ids.
DELETE FROM pgkick.jobs AS j
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.status IN ('done', 'failed')
  AND j.status = ANY(%(statuses)s::text[])
  AND (%(error)s::text IS NULL OR strpos(lower(j.last_error), lower(%(error)s::text)) > 0)
  AND NOT (j.has_dependants AND EXISTS (
    SELECT 1 FROM pgkick.job_dependencies AS d JOIN pgkick.jobs AS c ON c.id = d.child_id
    WHERE d.parent_id = j.id AND c.status <> 'done'))
RETURNING j.id;
