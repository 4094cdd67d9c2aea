-- queue_watcher_announce: A worker says it is draining a queue until the given instant; it takes up the pending kick and clears expired watchers (and any more than two hours ahead: none of pgkick's).
WITH cleared AS (
  DELETE FROM pgkick.queue_watchers
  WHERE queue = %(queue)s
    AND (watcher = 'kick' OR until <= coalesce(%(now)s::timestamptz, now())
         -- a row more than two hours ahead is none of pgkick's (queue_kick_reserve says why)
         OR until > coalesce(%(now)s::timestamptz, now()) + interval '2 hours')
    AND watcher <> %(watcher)s
)
INSERT INTO pgkick.queue_watchers AS w (queue, watcher, until)
VALUES (%(queue)s, %(watcher)s, coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval)
ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until;
