-- job_reap_expired: Re-queues running jobs whose lease expired (all queues, or the one a rescue names), or fails them at max_attempts (or when an operator asked to cancel them) with a last_error saying so; every reaped job is then lapsed (a suspect: migration 0035). A job lapsed already, whose worker never marked it started (job_lapsed_start), is given its attempt back (max_attempts + 1, never past 1000, as `pgkick retry`; attempts, the fencing token, never goes back): it only sat in a batch whose worker vanished.
UPDATE pgkick.jobs
SET status       = CASE WHEN cancel_requested_at IS NOT NULL
                             OR (attempts >= max_attempts AND NOT (lapsed AND max_attempts < 1000))
                        THEN 'failed' ELSE 'queued' END,
    finished_at  = CASE WHEN cancel_requested_at IS NOT NULL
                             OR (attempts >= max_attempts AND NOT (lapsed AND max_attempts < 1000))
                        THEN coalesce(%(now)s::timestamptz, now()) END,
    max_attempts = CASE WHEN lapsed AND max_attempts < 1000 AND cancel_requested_at IS NULL
                        THEN max_attempts + 1 ELSE max_attempts END,
    lapsed       = true,
    locked_until = NULL,
    last_error   = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled by operator'
                        WHEN lapsed AND max_attempts < 1000
                        THEN format('lease expired before it started (attempt %%s given back)',
                                    attempts)
                        ELSE format('lease expired (attempt %%s of %%s)', attempts, max_attempts)
                   END
WHERE status = 'running' AND locked_until < coalesce(%(now)s::timestamptz, now())
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
RETURNING id, queue, status, attempts;
