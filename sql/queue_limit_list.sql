-- queue_limit_list: Every queue's running limit, with how many of its jobs run now.
SELECT l.queue, l.max_running,
       (SELECT count(*) FROM pgkick.jobs r WHERE r.queue = l.queue AND r.status = 'running') AS running
FROM pgkick.queue_limits l
ORDER BY l.queue;
