-- job_complete_many: Marks a batch of running jobs done in one statement, each fenced by its own attempt; returns the ids still held.
UPDATE pgkick.jobs j
SET status = 'done', locked_until = NULL,
    finished_at = coalesce(%(now)s::timestamptz, now())
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempts)
WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
RETURNING j.id;
