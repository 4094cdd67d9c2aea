-- job_dependant_start_wait: Each finished dependant's task and the ms from its last parent's finish to its claim (the dependencies benchmark's release latency).
SELECT c.task,
       extract(epoch FROM c.claimed_at - max(p.finished_at)) * 1000 AS wait_ms
FROM pgkick.job_dependencies AS d
JOIN pgkick.jobs AS c ON c.id = d.child_id
JOIN pgkick.jobs AS p ON p.id = d.parent_id
WHERE c.status = 'done'
GROUP BY c.id, c.task, c.claimed_at;
