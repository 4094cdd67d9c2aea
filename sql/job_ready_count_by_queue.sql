-- job_ready_count_by_queue: Counts the jobs a claim could take now in each queue (which queues need a worker); a queue without a rate or a concurrency: ungrouped ready jobs, plus one for each group with no running job whose head is ready (a blocked group's jobs do not count); a queue with a rate or a concurrency (job_ready_fair_count, migration 0014; only those queues pay for it): its ready jobs with neither key if its own rate bucket has room, plus one for each key with a ready job its rate and its group's concurrency admit now (a held queue is not kicked: the sweep books its wake-up); a paused queue has none.
WITH RECURSIVE groups AS (  -- every (queue, group) with queued jobs, one index probe each
  (SELECT queue, group_key FROM pgkick.jobs
   WHERE group_key IS NOT NULL AND status = 'queued'
   ORDER BY queue, group_key LIMIT 1)
  UNION ALL
  SELECT n.queue, n.group_key
  FROM groups g,
       LATERAL (SELECT j.queue, j.group_key FROM pgkick.jobs j
                WHERE (j.queue, j.group_key) > (g.queue, g.group_key)
                  AND j.group_key IS NOT NULL AND j.status = 'queued'
                ORDER BY j.queue, j.group_key LIMIT 1) n
),
claimable AS (
  SELECT queue, 1 AS ready FROM pgkick.jobs
  WHERE status = 'queued' AND group_key IS NULL
    AND run_at <= coalesce(%(now)s::timestamptz, now())
  UNION ALL
  SELECT g.queue, 1 FROM groups g
  WHERE NOT EXISTS (SELECT 1 FROM pgkick.jobs r
                    WHERE r.queue = g.queue AND r.group_key = g.group_key
                      AND r.status = 'running')
    AND (SELECT h.run_at FROM pgkick.jobs h  -- job_claim's head: first in the group's order
         WHERE h.queue = g.queue AND h.group_key = g.group_key AND h.status = 'queued'
         ORDER BY -h.priority, h.ordered_at, h.id LIMIT 1)
        <= coalesce(%(now)s::timestamptz, now())
),
plain AS (
  SELECT queue, count(*) AS ready
  FROM claimable c
  WHERE NOT EXISTS (SELECT 1 FROM pgkick.queue_limits p
                    WHERE p.queue = c.queue
                      AND (p.paused OR p.rate_limit IS NOT NULL OR p.concurrency IS NOT NULL))
  GROUP BY queue
),
limited AS (  -- job_ready_fair_count (migration 0014): job_claim_fair_ids's rules, read only
  SELECT l.queue,
         pgkick.job_ready_fair_count(l.queue, coalesce(%(now)s::timestamptz, now()), 2147483647)
           AS ready
  FROM pgkick.queue_limits l
  WHERE NOT l.paused AND (l.rate_limit IS NOT NULL OR l.concurrency IS NOT NULL)
)
SELECT queue, ready FROM plain
UNION ALL
SELECT queue, ready FROM limited WHERE ready > 0
ORDER BY queue;
