-- job_extend: Pushes a running job's lease forward, only while this attempt still holds it (fenced; 0 rows = stop working); also says whether an operator asked to cancel it.
UPDATE pgkick.jobs
SET locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING locked_until, cancel_requested_at IS NOT NULL;
