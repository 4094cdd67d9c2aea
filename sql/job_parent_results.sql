-- job_parent_results: The results of a job's parents that ended done (JobContext.parent_results), in id order.
SELECT p.id, p.result
FROM pgkick.job_dependencies d
JOIN pgkick.jobs p ON p.id = d.parent_id
WHERE d.child_id = %(id)s AND p.status = 'done'
ORDER BY p.id;
