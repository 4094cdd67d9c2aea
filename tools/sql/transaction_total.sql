-- transaction_total: Transactions committed and rolled back in this database so far (pg_stat_database; final once the sessions that ran them have ended), the statement count's stand-in without pg_stat_statements.
SELECT xact_commit + xact_rollback AS transactions FROM pg_stat_database WHERE datname = current_database();
