-- job_reap_expired: Re-queues running jobs whose lease expired (all queues, or the one a rescue names), or fails them at max_attempts (or when an operator asked to cancel them) with a last_error saying so.
UPDATE pgkick.jobs
SET status       = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL
                        THEN 'failed' ELSE 'queued' END,
    finished_at  = CASE WHEN attempts >= max_attempts OR cancel_requested_at IS NOT NULL
                        THEN coalesce(%(now)s::timestamptz, now()) END,
    locked_until = NULL,
    last_error   = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled by operator'
                        ELSE format('lease expired (attempt %%s of %%s)', attempts, max_attempts)
                   END
WHERE status = 'running' AND locked_until < coalesce(%(now)s::timestamptz, now())
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
RETURNING id, queue, status, attempts;
