-- queue_kick_reserve: Of the queues given, returns those that nobody watches, marking each with a pending kick; the caller kicks exactly those.
WITH relaxed AS (
  -- A reservation lost in a crash costs one spare kick: its commit need not wait for the disk.
  SELECT set_config('synchronous_commit', 'off', true)
), wanted AS (
  SELECT DISTINCT q AS queue FROM unnest(%(queues)s::text[]) AS q, relaxed
  WHERE NOT EXISTS (
    SELECT 1 FROM pgkick.queue_watchers l
    WHERE l.queue = q AND l.until > coalesce(%(now)s::timestamptz, now())
  )
)
INSERT INTO pgkick.queue_watchers AS w (queue, watcher, until)
SELECT queue, 'kick', coalesce(%(now)s::timestamptz, now()) + %(pending)s::interval FROM wanted
ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until
  WHERE w.until <= coalesce(%(now)s::timestamptz, now())
RETURNING w.queue;
