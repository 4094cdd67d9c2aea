-- job_dependants_ready_queues: The queues of a job's dependants, direct or transitive, that are queued now: what a worker kicks after a job with dependants failed (its 'run anyway' dependants were released by migration 0017's trigger in the fail's own statement).
WITH RECURSIVE below AS (
  SELECT d.child_id FROM pgkick.job_dependencies d WHERE d.parent_id = %(id)s
  UNION
  SELECT d.child_id FROM pgkick.job_dependencies d JOIN below b ON d.parent_id = b.child_id
)
SELECT DISTINCT j.queue
FROM below b JOIN pgkick.jobs j ON j.id = b.child_id
WHERE j.status = 'queued'
ORDER BY j.queue;
