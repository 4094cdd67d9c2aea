-- queue_heal_plan: For each queue with queued jobs, the one wake-up to book for it (its earliest run_at still to come, or the earliest instant its rate admits a job a claim would take but for its rate) and whether it needs a kick: a job a claim could take now (a queue without a rate or a concurrency: ungrouped, or its group's head; with one: job_ready_fair_count, the claim's rules read only), nobody watching, nothing running (a running holder heals its own queue when it exits), not paused, and not the caller's own queue; those queues get a pending kick (as queue_kick_reserve marks one), so of racing callers exactly one kicks; the caller's own queue is only said to be unserved (ready, nobody watching, nothing running: its leaving worker claims it again, pgkick.worker.healing), and each row carries the statement's now (on the server's clock, as next_run_at).
WITH relaxed AS (
  -- A reservation lost in a crash costs one spare kick: its commit need not wait for the disk.
  SELECT set_config('synchronous_commit', 'off', true)
), heads AS (
  -- Each group's head, first in job_claim's order: a group is claimable only through it, so
  -- a ready job behind a head not due (or retrying) is not a reason to kick: two such
  -- queues' sweeps kicked each other's workers, which claimed nothing, until the head was due.
  SELECT DISTINCT ON (queue, group_key) queue, group_key, run_at
  FROM pgkick.jobs
  WHERE status = 'queued' AND group_key IS NOT NULL
  ORDER BY queue, group_key, -priority, ordered_at, id
), queued AS (
  SELECT j.queue,
         min(j.run_at) FILTER (WHERE j.run_at > coalesce(%(now)s::timestamptz, now())) AS next_run_at,
         bool_or(j.run_at <= coalesce(%(now)s::timestamptz, now()) AND j.group_key IS NULL)
           OR EXISTS (SELECT 1 FROM heads h
                      WHERE h.queue = j.queue AND h.run_at <= coalesce(%(now)s::timestamptz, now()))
           AS ready
  FROM pgkick.jobs j
  WHERE j.status = 'queued'
  GROUP BY j.queue
), rated AS (
  -- A queue with a rate (migration 0014): each rate key of a job a claim would take but for
  -- its rate (an ungrouped ready job, or a ready one among its group's first `concurrency`
  -- queued jobs (1 without one) less those running: job_claim_fair_ids's candidates) is
  -- admitted again once the newest rate_limit-th start of its window is a period old; the
  -- earliest such instant still to come is the queue's wake-up. A key of jobs no claim can
  -- take yet (a follower behind its group's head) is not one: its room said "now" and hid
  -- the held keys' instant (the wake-up fell back to the next run_at, or to none).
  SELECT l.queue,
         min(a.admit) FILTER (WHERE a.admit > coalesce(%(now)s::timestamptz, now())) AS admit
  FROM pgkick.queue_limits l,
       LATERAL (SELECT coalesce(j.rate_key, '') AS rate_key FROM pgkick.jobs j
                WHERE j.queue = l.queue AND j.status = 'queued' AND j.group_key IS NULL
                  AND j.run_at <= coalesce(%(now)s::timestamptz, now())
                UNION
                SELECT coalesce(f.rate_key, '')
                FROM heads g,
                     LATERAL (SELECT h.rate_key, h.run_at FROM pgkick.jobs h
                              WHERE h.queue = g.queue AND h.group_key = g.group_key
                                AND h.status = 'queued'
                              ORDER BY -h.priority, h.ordered_at, h.id
                              LIMIT greatest(coalesce(l.concurrency, 1)
                                             - (SELECT count(*) FROM pgkick.jobs r
                                                WHERE r.queue = g.queue
                                                  AND r.group_key = g.group_key
                                                  AND r.status = 'running'), 0)) f
                WHERE g.queue = l.queue
                  AND f.run_at <= coalesce(%(now)s::timestamptz, now())) k,
       LATERAL (SELECT CASE WHEN count(*) < l.rate_limit
                            THEN coalesce(%(now)s::timestamptz, now())
                            ELSE (array_agg(s.started_at ORDER BY s.started_at DESC))[l.rate_limit]
                                 + l.rate_period
                       END AS admit
                FROM pgkick.job_starts s
                WHERE s.queue = l.queue AND s.rate_key = k.rate_key
                  AND s.started_at > coalesce(%(now)s::timestamptz, now()) - l.rate_period) a
  WHERE l.rate_limit IS NOT NULL AND NOT l.paused
  GROUP BY l.queue
), planned AS (
  SELECT q.queue,
         CASE WHEN p.paused THEN q.next_run_at
              ELSE least(q.next_run_at, r.admit) END AS next_run_at,
         CASE WHEN coalesce(p.paused, false) THEN false
              -- the claim's rules (migration 0014), read only: a queue whose ready jobs are
              -- all held (by a key's rate, a group's concurrency or its head) is not kicked
              WHEN p.rate_limit IS NOT NULL OR p.concurrency IS NOT NULL
              THEN pgkick.job_ready_fair_count(q.queue, coalesce(%(now)s::timestamptz, now()), 1) > 0
              ELSE q.ready END AS ready
  FROM queued q
  LEFT JOIN rated r ON r.queue = q.queue
  LEFT JOIN pgkick.queue_limits p ON p.queue = q.queue
), unwatched AS (
  SELECT q.queue FROM planned q
  WHERE q.ready
    AND NOT EXISTS (SELECT 1 FROM pgkick.queue_watchers w
                    WHERE w.queue = q.queue AND w.until > coalesce(%(now)s::timestamptz, now())
                      -- never more than two hours ahead (queue_kick_reserve says why)
                      AND w.until <= coalesce(%(now)s::timestamptz, now()) + interval '2 hours')
    AND NOT EXISTS (SELECT 1 FROM pgkick.jobs r WHERE r.queue = q.queue AND r.status = 'running')
), reserved AS (
  INSERT INTO pgkick.queue_watchers AS w (queue, watcher, until)
  SELECT queue, 'kick', coalesce(%(now)s::timestamptz, now()) + %(pending)s::interval
  FROM unwatched, relaxed
  WHERE queue IS DISTINCT FROM %(skip)s::text
  ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until
    WHERE w.until <= coalesce(%(now)s::timestamptz, now())
       OR w.until > coalesce(%(now)s::timestamptz, now()) + interval '2 hours'
  RETURNING w.queue
)
SELECT q.queue, q.next_run_at, r.queue IS NOT NULL AS kick, u.queue IS NOT NULL AS unserved,
       coalesce(%(now)s::timestamptz, now()) AS swept_at
FROM planned q
LEFT JOIN reserved r ON r.queue = q.queue
LEFT JOIN unwatched u ON u.queue = q.queue
ORDER BY q.queue;
