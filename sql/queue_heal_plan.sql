-- queue_heal_plan: For each queue with queued jobs, its earliest run_at still to come (the one wake-up to book for it) and whether it needs a kick: a ready job, nobody watching, nothing running (a running holder heals its own queue when it exits), and not the caller's own queue; those queues get a pending kick (as queue_kick_reserve marks one), so of racing callers exactly one kicks.
WITH relaxed AS (
  -- A reservation lost in a crash costs one spare kick: its commit need not wait for the disk.
  SELECT set_config('synchronous_commit', 'off', true)
), queued AS (
  SELECT queue,
         min(run_at) FILTER (WHERE run_at > coalesce(%(now)s::timestamptz, now())) AS next_run_at,
         bool_or(run_at <= coalesce(%(now)s::timestamptz, now())) AS ready
  FROM pgkick.jobs
  WHERE status = 'queued'
  GROUP BY queue
), unwatched AS (
  SELECT q.queue FROM queued q, relaxed
  WHERE q.ready
    AND q.queue IS DISTINCT FROM %(skip)s::text
    AND NOT EXISTS (SELECT 1 FROM pgkick.queue_watchers w
                    WHERE w.queue = q.queue AND w.until > coalesce(%(now)s::timestamptz, now()))
    AND NOT EXISTS (SELECT 1 FROM pgkick.jobs r WHERE r.queue = q.queue AND r.status = 'running')
), reserved AS (
  INSERT INTO pgkick.queue_watchers AS w (queue, watcher, until)
  SELECT queue, 'kick', coalesce(%(now)s::timestamptz, now()) + %(pending)s::interval FROM unwatched
  ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until
    WHERE w.until <= coalesce(%(now)s::timestamptz, now())
  RETURNING w.queue
)
SELECT q.queue, q.next_run_at, r.queue IS NOT NULL AS kick
FROM queued q LEFT JOIN reserved r ON r.queue = q.queue
ORDER BY q.queue;
