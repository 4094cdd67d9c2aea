-- job_snooze: Puts a running job back in the queue at now + seconds without using an attempt (fenced: only while this attempt holds it); returns when it is due.
UPDATE pgkick.jobs
SET status       = 'queued',
    attempts     = attempts - 1,
    run_at       = coalesce(%(now)s::timestamptz, now()) + %(seconds)s * interval '1 second',
    locked_until = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING run_at;
