-- job_extend_many: Pushes the leases of a batch forward in one statement, each fenced by its own attempt; returns the ids still held, each with whether an operator asked to cancel it.
UPDATE pgkick.jobs j
SET locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempts)
WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
RETURNING j.id, j.cancel_requested_at IS NOT NULL;
