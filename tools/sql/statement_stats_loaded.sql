-- statement_stats_loaded: Whether the server preloads pg_stat_statements, so its counts can be read (else the benchmark counts transactions instead).
SELECT position('pg_stat_statements' IN current_setting('shared_preload_libraries')) > 0 AS loaded;
