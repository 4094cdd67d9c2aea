-- job_retry_unique_conflicts: For the failed jobs a retry would select (by ids, or by queue and task), each whose unique key a waiting, queued or running job holds, or an earlier selected job shares: the job, its key, and the job in the way (a retry of it would break the one-live-job-per-key rule).
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
SELECT c.id, c.unique_key, other.id, 'failed'
FROM chosen c
JOIN chosen other ON other.unique_key = c.unique_key AND other.id < c.id
ORDER BY 1, 3;
