-- queue_watcher_listen: A lingering worker, already LISTENing, names its channel on its announcement until the given instant, so producers that find it NOTIFY it.
UPDATE pgkick.queue_watchers
SET channel = %(channel)s,
    listening_until = coalesce(%(now)s::timestamptz, now()) + %(window)s::interval
WHERE queue = %(queue)s AND watcher = %(watcher)s;
