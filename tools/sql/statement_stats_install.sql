-- statement_stats_install: Installs pg_stat_statements in this database when the server preloads it (for the idle query rate).
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
