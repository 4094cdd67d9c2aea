-- session_count_others: How many client sessions other than this one are connected to this database now.
SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend';
