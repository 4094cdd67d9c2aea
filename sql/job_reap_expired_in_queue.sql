-- job_reap_expired_in_queue: Re-queues one queue's running jobs whose lease expired (failing them at max_attempts): what a rescue wake-up does before it drains.
UPDATE jobs
SET status       = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
    finished_at  = CASE WHEN attempts >= max_attempts
                        THEN coalesce(%(now)s::timestamptz, now()) END,
    locked_until = NULL,
    last_error   = format('lease expired (attempt %%s of %%s)', attempts, max_attempts)
WHERE queue = %(queue)s AND status = 'running'
  AND locked_until < coalesce(%(now)s::timestamptz, now())
RETURNING id, queue, status, attempts;
