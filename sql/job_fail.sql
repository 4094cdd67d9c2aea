-- job_fail: Records a failed attempt (fenced): queued again after backoff x 2^attempts (default 10 s, at most the cap, default 1 hour) times the caller's jitter factor, or failed at max_attempts, when permanent, or 'cancelled by operator' when a cancel was requested since the worker's last heartbeat; has_dependants says whether dependants may have been released (migration 0017).
UPDATE pgkick.jobs
SET status       = CASE WHEN %(permanent)s::boolean OR attempts >= max_attempts
                             OR cancel_requested_at IS NOT NULL
                        THEN 'failed' ELSE 'queued' END,
    run_at       = CASE WHEN %(permanent)s::boolean OR attempts >= max_attempts
                             OR cancel_requested_at IS NOT NULL THEN run_at
                        ELSE coalesce(%(now)s::timestamptz, now())
                             + least(coalesce(%(backoff_cap)s::interval, interval '1 hour'),
                                     coalesce(%(backoff)s::interval, interval '10 seconds')
                                     * 2 ^ least(attempts, 20))
                               * coalesce(%(jitter)s::float8, 1.0)
                   END,
    finished_at  = CASE WHEN %(permanent)s::boolean OR attempts >= max_attempts
                             OR cancel_requested_at IS NOT NULL
                        THEN coalesce(%(now)s::timestamptz, now()) END,
    locked_until = NULL,
    last_error   = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled by operator'
                        ELSE left(%(error)s, 2000) END
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING id, queue, status, run_at, has_dependants;
