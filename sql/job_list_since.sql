-- job_list_since: The jobs with an id above after (optionally of one task, one queue, one status), in id order, with payloads and statuses: what pgkick.testing's modes and assertions read, so a test sees only the jobs it made.
SELECT id, queue, task, payload, status, attempts, run_at
FROM pgkick.jobs
WHERE id > %(after)s::bigint
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
ORDER BY id;
