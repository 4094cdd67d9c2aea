-- job_table_health: The jobs table's dead tuples and last (auto)vacuum, which the article says to watch.
SELECT n_live_tup, n_dead_tup, last_vacuum, last_autovacuum
FROM pg_stat_user_tables
WHERE relid = to_regclass(quote_ident(%(schema)s) || '.jobs');
