-- queue_watchers_clear: Forgets every worker announcement and pending kick between benchmark items (benchmarks only).
DELETE FROM pgkick.queue_watchers;
