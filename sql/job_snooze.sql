-- job_snooze: Puts a running job back in the queue at now + seconds without using an attempt (fenced: only while this attempt holds it), or, when a cancel was requested since the worker's last heartbeat, fails it 'cancelled by operator'; returns its status and when it is due.
UPDATE pgkick.jobs
SET status       = CASE WHEN cancel_requested_at IS NULL THEN 'queued' ELSE 'failed' END,
    attempts     = CASE WHEN cancel_requested_at IS NULL THEN attempts - 1 ELSE attempts END,
    run_at       = CASE WHEN cancel_requested_at IS NULL
                        THEN coalesce(%(now)s::timestamptz, now()) + %(seconds)s * interval '1 second'
                        ELSE run_at END,
    finished_at  = CASE WHEN cancel_requested_at IS NULL THEN finished_at
                        ELSE coalesce(%(now)s::timestamptz, now()) END,
    last_error   = CASE WHEN cancel_requested_at IS NULL THEN last_error
                        ELSE 'cancelled by operator' END,
    locked_until = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING run_at, status;
