-- job_workflow_list: The jobs of the workflow holding a job (pgkick.Workflow): those linked to it through job_dependencies, either way, and created by the same transaction, each with its parents among them, in id order.
WITH RECURSIVE anchor AS (
  SELECT id, created_at FROM pgkick.jobs WHERE id = %(id)s
), member(id) AS (
  SELECT id FROM anchor
  UNION
  SELECT j.id
  FROM member m
  CROSS JOIN LATERAL (
    SELECT d.child_id AS other FROM pgkick.job_dependencies d
    WHERE d.parent_id = m.id
    UNION ALL
    SELECT d.parent_id FROM pgkick.job_dependencies d
    WHERE d.child_id = m.id
  ) e
  JOIN pgkick.jobs j ON j.id = e.other
  WHERE j.created_at = (SELECT created_at FROM anchor)
)
SELECT j.id, j.task, j.queue, j.status, j.attempts, j.claimed_at, j.finished_at, j.last_error,
       array(SELECT d.parent_id FROM pgkick.job_dependencies d
             WHERE d.child_id = j.id
               AND d.parent_id IN (SELECT id FROM member)
             ORDER BY d.parent_id) AS parents
FROM pgkick.jobs j
WHERE j.id IN (SELECT id FROM member)
ORDER BY j.id;
