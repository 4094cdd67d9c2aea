-- job_cancel_requested_among: Of the jobs a worker holds (each fenced by its attempt), those an operator asked to cancel: a read by primary key, no lease written (the lease keeper's check between two extensions, so a cancel reaches a task within seconds whatever the lease).
SELECT j.id
FROM pgkick.jobs j
JOIN unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempts) ON j.id = held.id
WHERE j.status = 'running' AND j.attempts = held.attempts
  AND j.cancel_requested_at IS NOT NULL;
