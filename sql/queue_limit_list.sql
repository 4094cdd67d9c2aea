-- queue_limit_list: Every queue's limits (running, rate per period, concurrency per key, paused), with how many of its jobs run now.
SELECT l.queue, l.max_running,
       (SELECT count(*) FROM pgkick.jobs r WHERE r.queue = l.queue AND r.status = 'running') AS running,
       l.rate_limit, extract(epoch FROM l.rate_period)::float8 AS rate_period_seconds,
       l.concurrency, l.paused
FROM pgkick.queue_limits l
ORDER BY l.queue;
