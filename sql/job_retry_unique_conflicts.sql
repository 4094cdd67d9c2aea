-- job_retry_unique_conflicts: For the failed jobs a retry would select (by ids, or by queue and task), each whose unique key a waiting, queued or running job holds, or an earlier selected job shares, or a newer job outside the selection took since (done or failed): the job, its key, the job in the way and its status. A retry of it would break the one-live-job-per-key rule, or, for a newer job, the rule a duplicate's read-back relies on (job_get_latest_by_unique_keys: the newest job with a key is the one that may hold it).
WITH chosen AS (
  SELECT id, unique_key FROM pgkick.jobs
  WHERE status = 'failed'
    AND attempts < 1000
    AND unique_key IS NOT NULL
    AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
    AND (%(queue)s::text IS NULL OR queue = %(queue)s)
    AND (%(task)s::text IS NULL OR task = %(task)s)
)
SELECT c.id, c.unique_key, live.id AS holder, live.status
FROM chosen c
JOIN pgkick.jobs live
  ON live.unique_key = c.unique_key AND live.status IN ('waiting', 'queued', 'running')
UNION ALL
SELECT c.id, c.unique_key, other.id, 'shared'
FROM chosen c
JOIN chosen other ON other.unique_key = c.unique_key AND other.id < c.id
UNION ALL
SELECT c.id, c.unique_key, newer.id, 'newer ' || newer.status
FROM chosen c
JOIN pgkick.jobs newer
  ON newer.unique_key = c.unique_key AND newer.id > c.id AND newer.status IN ('done', 'failed')
WHERE newer.id NOT IN (SELECT chosen.id FROM chosen)
ORDER BY 1, 3;
