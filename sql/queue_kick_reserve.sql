-- queue_kick_reserve: Of the queues given, returns those that nobody watches and that are not paused, marking each with a pending kick; the caller kicks exactly those. A worker lingering on one of them with a channel is NOTIFYed (delivered at this commit).
WITH relaxed AS (
  -- A reservation lost in a crash costs one spare kick: its commit need not wait for the disk.
  SELECT set_config('synchronous_commit', 'off', true)
), wanted AS (
  SELECT DISTINCT q AS queue FROM unnest(%(queues)s::text[]) AS q, relaxed
  WHERE NOT EXISTS (
    -- A watcher counts until its `until`, never more than two hours ahead: no announcement
    -- (PGKICK_WATCH_SECONDS) or reservation (PGKICK_KICK_PENDING_MS) reaches past one hour
    -- from its writer's now() (another transaction's now() may be earlier: the second hour
    -- is the margin), so a row past it is none of pgkick's (a producer may write this
    -- table) and holds nothing.
    SELECT 1 FROM pgkick.queue_watchers l
    WHERE l.queue = q AND l.until > coalesce(%(now)s::timestamptz, now())
      AND l.until <= coalesce(%(now)s::timestamptz, now()) + interval '2 hours'
  )
  AND NOT EXISTS (SELECT 1 FROM pgkick.queue_limits p WHERE p.queue = q AND p.paused)
), reserved AS (
  INSERT INTO pgkick.queue_watchers AS w (queue, watcher, until)
  SELECT queue, 'kick', coalesce(%(now)s::timestamptz, now()) + %(pending)s::interval FROM wanted
  ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until
    WHERE w.until <= coalesce(%(now)s::timestamptz, now())
       OR w.until > coalesce(%(now)s::timestamptz, now()) + interval '2 hours'
  RETURNING w.queue
), woken AS (
  -- Only a worker that lingers has listening_until ahead (pgkick.worker.linger): a busy
  -- worker, a pending kick, or an idle queue gets no NOTIFY.
  SELECT count(pg_notify(l.channel, '')) AS n FROM pgkick.queue_watchers l
  WHERE l.queue = ANY(%(queues)s::text[])
    AND l.listening_until > coalesce(%(now)s::timestamptz, now())
    AND l.until > coalesce(%(now)s::timestamptz, now())
    AND l.until <= coalesce(%(now)s::timestamptz, now()) + interval '2 hours'
)
-- UNION ALL runs both branches to the end: the NOTIFYs are sent whether or not a kick was
-- reserved (the woken branch itself returns no row).
SELECT queue FROM reserved
UNION ALL
SELECT NULL FROM woken WHERE n < 0;
