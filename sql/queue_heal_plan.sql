-- queue_heal_plan: For each queue with queued jobs, the one wake-up to book for it (its earliest run_at still to come, or the instant its rate admits the next of its ready jobs held by the rate) and whether it needs a kick: a ready job a claim could take (ungrouped, or its group's head) its rate admits now, nobody watching, nothing running (a running holder heals its own queue when it exits), not paused, and not the caller's own queue; those queues get a pending kick (as queue_kick_reserve marks one), so of racing callers exactly one kicks.
WITH relaxed AS (
  -- A reservation lost in a crash costs one spare kick: its commit need not wait for the disk.
  SELECT set_config('synchronous_commit', 'off', true)
), heads AS (
  -- Each group's head, first in job_claim's order: a group is claimable only through it, so
  -- a ready job behind a head not due (or retrying) is not a reason to kick: two such
  -- queues' sweeps kicked each other's workers, which claimed nothing, until the head was due.
  SELECT DISTINCT ON (queue, group_key) queue, run_at
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
  -- A queue with a rate (migration 0014): each rate key with ready jobs is admitted again
  -- once the newest rate_limit-th start of its window is a period old.
  SELECT l.queue, min(a.admit) AS admit
  FROM pgkick.queue_limits l,
       LATERAL (SELECT DISTINCT coalesce(j.rate_key, '') AS rate_key FROM pgkick.jobs j
                WHERE j.queue = l.queue AND j.status = 'queued'
                  AND j.run_at <= coalesce(%(now)s::timestamptz, now())) k,
       LATERAL (SELECT CASE WHEN count(*) < l.rate_limit
                            THEN coalesce(%(now)s::timestamptz, now())
                            ELSE (array_agg(s.started_at ORDER BY s.started_at DESC))[l.rate_limit]
                                 + l.rate_period
                       END AS admit
                FROM pgkick.job_starts s
                WHERE s.queue = l.queue AND s.rate_key = k.rate_key
                  AND s.started_at > coalesce(%(now)s::timestamptz, now()) - l.rate_period) a
  WHERE l.rate_limit IS NOT NULL
  GROUP BY l.queue
), planned AS (
  SELECT q.queue,
         CASE WHEN p.paused THEN q.next_run_at
              WHEN r.admit > coalesce(%(now)s::timestamptz, now())
              THEN least(q.next_run_at, r.admit)
              ELSE q.next_run_at END AS next_run_at,
         q.ready AND NOT coalesce(p.paused, false)
           AND NOT coalesce(r.admit > coalesce(%(now)s::timestamptz, now()), false) AS ready
  FROM queued q
  LEFT JOIN rated r ON r.queue = q.queue
  LEFT JOIN pgkick.queue_limits p ON p.queue = q.queue
), unwatched AS (
  SELECT q.queue FROM planned q, relaxed
  WHERE q.ready
    AND q.queue IS DISTINCT FROM %(skip)s::text
    AND NOT EXISTS (SELECT 1 FROM pgkick.queue_watchers w
                    WHERE w.queue = q.queue AND w.until > coalesce(%(now)s::timestamptz, now())
                      -- never more than two hours ahead (queue_kick_reserve says why)
                      AND w.until <= coalesce(%(now)s::timestamptz, now()) + interval '2 hours')
    AND NOT EXISTS (SELECT 1 FROM pgkick.jobs r WHERE r.queue = q.queue AND r.status = 'running')
), reserved AS (
  INSERT INTO pgkick.queue_watchers AS w (queue, watcher, until)
  SELECT queue, 'kick', coalesce(%(now)s::timestamptz, now()) + %(pending)s::interval FROM unwatched
  ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until
    WHERE w.until <= coalesce(%(now)s::timestamptz, now())
       OR w.until > coalesce(%(now)s::timestamptz, now()) + interval '2 hours'
  RETURNING w.queue
)
SELECT q.queue, q.next_run_at, r.queue IS NOT NULL AS kick
FROM planned q LEFT JOIN reserved r ON r.queue = q.queue
ORDER BY q.queue;
