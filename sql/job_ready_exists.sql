-- job_ready_exists: Says whether a queue has a job a claim could take now; a queue without a rate or a concurrency (the common case, one probe of queue_limits first): an ungrouped ready job among the first hundred in claim order (the cheap common answer), a ready head of a group with no running job (a loose index scan over its groups), or an ungrouped ready job further on; a queue with a rate or a concurrency (migration 0014): a ready job its key's rate and its group's concurrency admit now (job_ready_fair_count, migration 0014: a loose index scan over its keys, planned apart so this statement stays cheap to plan); a held job does not count, so a worker out of time hands over only for claimable work (the exit sweep books a held queue's wake-up); a paused queue has none.
SELECT CASE
  WHEN NOT EXISTS (SELECT 1 FROM pgkick.queue_limits p
                   WHERE p.queue = %(queue)s
                     AND (p.paused OR p.rate_limit IS NOT NULL OR p.concurrency IS NOT NULL))
  THEN (EXISTS (
         SELECT 1 FROM (SELECT group_key FROM pgkick.jobs
                        WHERE queue = %(queue)s AND status = 'queued'
                          AND run_at <= coalesce(%(now)s::timestamptz, now())
                        ORDER BY priority DESC, run_at LIMIT 100) AS first
         WHERE first.group_key IS NULL)
    OR EXISTS (
         WITH RECURSIVE groups AS (  -- the queue's groups with queued jobs, one index probe each
           (SELECT group_key FROM pgkick.jobs
            WHERE queue = %(queue)s AND group_key IS NOT NULL AND status = 'queued'
            ORDER BY group_key LIMIT 1)
           UNION ALL
           SELECT (SELECT j.group_key FROM pgkick.jobs j
                   WHERE j.queue = %(queue)s AND j.group_key > g.group_key
                     AND j.group_key IS NOT NULL AND j.status = 'queued'
                   ORDER BY j.group_key LIMIT 1)
           FROM groups g WHERE g.group_key IS NOT NULL
         )
         SELECT 1 FROM groups g
         WHERE g.group_key IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM pgkick.jobs r
                           WHERE r.queue = %(queue)s AND r.group_key = g.group_key
                             AND r.status = 'running')
           AND (SELECT h.run_at FROM pgkick.jobs h  -- job_claim's head: first in the group's order
                WHERE h.queue = %(queue)s AND h.group_key = g.group_key
                  AND h.status = 'queued'
                ORDER BY -h.priority, h.ordered_at, h.id LIMIT 1)
               <= coalesce(%(now)s::timestamptz, now())
       )
    OR EXISTS (
         SELECT 1 FROM pgkick.jobs
         WHERE queue = %(queue)s AND status = 'queued' AND group_key IS NULL
           AND run_at <= coalesce(%(now)s::timestamptz, now())))
  ELSE pgkick.job_ready_fair_count(%(queue)s, coalesce(%(now)s::timestamptz, now()), 1) > 0
END;
