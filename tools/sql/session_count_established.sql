-- session_count_established: How many sessions this database has ever had (pg_stat_database.sessions; run in autocommit, so each read is fresh).
SELECT sessions FROM pg_stat_database WHERE datname = current_database();
