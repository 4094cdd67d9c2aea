-- job_purgeable_count: How many done or failed jobs, by status, finished more than retention ago (what job_purge_finished would delete: `pgkick purge --older-than --dry-run`), a parent one of whose dependants is not done left out as it leaves it.
SELECT j.status, count(*)::int
FROM pgkick.jobs AS j
WHERE j.status IN ('done', 'failed')
  AND j.finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
  AND NOT (j.has_dependants AND EXISTS (
    SELECT 1 FROM pgkick.job_dependencies AS d JOIN pgkick.jobs AS c ON c.id = d.child_id
    WHERE d.parent_id = j.id AND c.status <> 'done'))
GROUP BY j.status
ORDER BY j.status;
