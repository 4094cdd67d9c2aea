-- job_purgeable_count: How many done or failed jobs, by status, finished more than retention ago, as job_purge_finished's statements delete them one after another (`pgkick purge --older-than --dry-run`): a parent one of whose dependants is not done is left out, unless that dependant is itself a failed job old enough to go first, and not left itself (so an old failed chain counts whole); nor the newest job of a unique key younger than 30 days (the longest throttle answers with it).
WITH RECURSIVE kept AS (  -- parents that stay: a dependant not done that no purge takes
  SELECT d.parent_id AS id
  FROM pgkick.job_dependencies AS d JOIN pgkick.jobs AS c ON c.id = d.child_id
  WHERE c.status <> 'done'
    AND NOT (c.status = 'failed'
             AND c.finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
             AND NOT (c.unique_key IS NOT NULL  -- kept as a throttle's answer (below)
                      AND c.created_at > coalesce(%(now)s::timestamptz, now()) - interval '30 days'
                      AND NOT EXISTS (SELECT 1 FROM pgkick.jobs AS n
                                      WHERE n.unique_key = c.unique_key AND n.id > c.id)))
  UNION
  SELECT d.parent_id
  FROM kept AS k
  JOIN pgkick.jobs AS c ON c.id = k.id AND c.status <> 'done'
  JOIN pgkick.job_dependencies AS d ON d.child_id = k.id
)
SELECT j.status, count(*)::int
FROM pgkick.jobs AS j
WHERE j.status IN ('done', 'failed')
  AND j.finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
  AND NOT (j.has_dependants AND j.id IN (SELECT id FROM kept))
  AND NOT (j.unique_key IS NOT NULL  -- a throttle's answer (job_insert_flow): the key's newest
           AND j.created_at > coalesce(%(now)s::timestamptz, now()) - interval '30 days'
           AND NOT EXISTS (SELECT 1 FROM pgkick.jobs AS n
                           WHERE n.unique_key = j.unique_key AND n.id > j.id))
GROUP BY j.status
ORDER BY j.status;
