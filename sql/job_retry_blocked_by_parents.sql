-- job_retry_blocked_by_parents: For the failed jobs a retry would select (by ids, or by queue and task), each that waits for a parent, under policy fail or cancel, which is failed and not selected too: the job and that parent (retried alone it would run as if the parent had succeeded; the parent's retry revives it, migration 0019).
SELECT j.id, p.id AS parent
FROM pgkick.jobs AS j
JOIN pgkick.job_dependencies AS d ON d.child_id = j.id AND d.policy <> 'run anyway'
JOIN pgkick.jobs AS p ON p.id = d.parent_id AND p.status = 'failed'
WHERE j.status = 'failed'
  AND j.attempts < 1000
  AND (%(ids)s::bigint[] IS NULL OR j.id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
  AND (%(task)s::text IS NULL OR j.task = %(task)s)
  AND NOT (p.attempts < 1000
           AND (%(ids)s::bigint[] IS NULL OR p.id = ANY(%(ids)s::bigint[]))
           AND (%(queue)s::text IS NULL OR p.queue = %(queue)s)
           AND (%(task)s::text IS NULL OR p.task = %(task)s))
ORDER BY 1, 2;
