-- queue_flow_held: Says whether a queue's empty claim was its flow control's doing: the queue is paused, or it has a rate and ready jobs (held by the rate); a worker then leaves at once instead of lingering on it (its exit sweep books the rate's wake-up).
SELECT EXISTS (
  SELECT 1 FROM pgkick.queue_limits l
  WHERE l.queue = %(queue)s
    AND (l.paused
         OR (l.rate_limit IS NOT NULL
             AND EXISTS (SELECT 1 FROM pgkick.jobs j
                         WHERE j.queue = l.queue AND j.status = 'queued'
                           AND j.run_at <= coalesce(%(now)s::timestamptz, now())))));
