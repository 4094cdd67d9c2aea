-- job_purgeable_count: How many done or failed jobs, by status, finished more than retention ago (what job_purge_finished would delete: `pgkick purge --older-than --dry-run`).
SELECT status, count(*)::int
FROM pgkick.jobs
WHERE status IN ('done', 'failed')
  AND finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
GROUP BY status
ORDER BY status;
