-- queue_overview: Per queue with queued, running or failed jobs or a row of limits: jobs ready now, jobs queued for later, running and failed jobs, the oldest ready job's age, its limits (running, rate per period, concurrency per key) and whether it is paused; read from the partial indexes of queued, running and failed jobs, never the finished history (the dashboard's queues).
WITH queued AS (
  SELECT queue,
         count(*) FILTER (WHERE run_at <= coalesce(%(now)s::timestamptz, now())) AS ready,
         count(*) FILTER (WHERE run_at > coalesce(%(now)s::timestamptz, now())) AS later,
         min(run_at) FILTER (WHERE run_at <= coalesce(%(now)s::timestamptz, now()))
           AS oldest_ready
  FROM pgkick.jobs WHERE status = 'queued' GROUP BY queue
),
running AS (
  SELECT queue, count(*) AS running FROM pgkick.jobs WHERE status = 'running' GROUP BY queue
),
failed AS (
  SELECT queue, count(*) AS failed FROM pgkick.jobs WHERE status = 'failed' GROUP BY queue
),
names AS (
  SELECT queue FROM queued UNION SELECT queue FROM running
  UNION SELECT queue FROM failed UNION SELECT queue FROM pgkick.queue_limits
)
SELECT n.queue,
       coalesce(q.ready, 0) AS ready,
       coalesce(q.later, 0) AS later,
       coalesce(r.running, 0) AS running,
       coalesce(f.failed, 0) AS failed,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - q.oldest_ready)
         AS oldest_ready_seconds,
       l.max_running,
       l.rate_limit,
       extract(epoch FROM l.rate_period)::float8 AS rate_period_seconds,
       l.concurrency,
       coalesce(l.paused, false) AS paused
FROM names n
LEFT JOIN queued q ON q.queue = n.queue
LEFT JOIN running r ON r.queue = n.queue
LEFT JOIN failed f ON f.queue = n.queue
LEFT JOIN pgkick.queue_limits l ON l.queue = n.queue
ORDER BY n.queue;
