-- job_list_queued: The queued jobs (optionally of one task and one queue), oldest first, with their payloads: what pgkick.testing's manual mode asserts on.
SELECT id, queue, task, payload, run_at
FROM pgkick.jobs
WHERE status = 'queued'
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY id;
