-- job_lapsed_start: Marks claimed suspects (jobs whose previous attempt's lease lapsed, migration 0035) started, just before they run: fenced, each by its attempt, while running; clears lapsed, so if this attempt's lease lapses too the reaper charges it. Returns the ids still held: a job missing was taken over, and must not start.
UPDATE pgkick.jobs AS j
SET lapsed = false
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempts)
WHERE j.id = held.id AND j.attempts = held.attempts AND j.status = 'running'
RETURNING j.id;
