-- session_terminate_clients: Closes the other client sessions of this database that have been idle for the whole window, as a suspending compute does (one that connected a moment ago is not caught); only those with one of the given application names, unless none are given.
SELECT count(pg_terminate_backend(pid)) AS closed
FROM pg_stat_activity
WHERE pid <> pg_backend_pid()
  AND backend_type = 'client backend'
  AND datname = current_database()
  AND state = 'idle'
  AND state_change < now() - make_interval(secs => %(window)s)
  AND (%(apps)s::text[] IS NULL OR application_name = ANY(%(apps)s::text[]));
