-- queue_limit_flow_get: A queue's rate and concurrency (NULLs: not set, or no row) and whether it has queued jobs, read before they change: a change that loosens a limit over queued jobs frees jobs the old limit held, and its caller kicks the queue.
SELECT l.rate_limit, l.rate_period, l.concurrency,
       EXISTS (SELECT 1 FROM pgkick.jobs j WHERE j.queue = q.queue AND j.status = 'queued')
         AS queued
FROM (SELECT %(queue)s::text AS queue) q
LEFT JOIN pgkick.queue_limits l ON l.queue = q.queue;
