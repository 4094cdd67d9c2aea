-- job_complete_many: Marks a batch of running jobs done in one statement, each fenced by its own attempt, storing each one's result (JSON text or NULL); returns the ids still held.
UPDATE pgkick.jobs j
SET status = 'done', locked_until = NULL,
    finished_at = coalesce(%(now)s::timestamptz, now()),
    result = held.result::jsonb
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(results)s::text[])
     AS held(id, attempts, result)
WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
RETURNING j.id;
