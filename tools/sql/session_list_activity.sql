-- session_list_activity: The server's now, how many sessions this database has ever had, and the sessions a serverless compute's activity monitor looks at: client backends of this database, autovacuum workers, walsenders (one row with a NULL pid when there are none).
SELECT now() AS now,
       (SELECT sessions FROM pg_stat_database WHERE datname = current_database()) AS sessions_ever,
       a.pid, a.application_name, a.backend_type, a.state, a.state_change
FROM (SELECT 1) AS one
LEFT JOIN pg_stat_activity AS a
  ON a.pid <> pg_backend_pid()
 AND (a.backend_type IN ('autovacuum worker', 'walsender')
      OR (a.backend_type = 'client backend' AND a.datname = current_database()));
