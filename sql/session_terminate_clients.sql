-- session_terminate_clients: Closes every other client session of this database, as a suspending compute does.
SELECT count(pg_terminate_backend(pid)) AS closed
FROM pg_stat_activity
WHERE pid <> pg_backend_pid()
  AND backend_type = 'client backend'
  AND datname = current_database();
