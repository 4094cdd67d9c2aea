-- database_scratch_state: Whether this database has a jobs table, whether pgkick bench or demo marked it as their own, and whether a peer queue's tables are here.
SELECT to_regclass(quote_ident(%(schema)s) || '.jobs') IS NOT NULL AS has_jobs_table,
       coalesce(obj_description(to_regclass(quote_ident(%(schema)s) || '.jobs'), 'pg_class'), '')
         = 'pgkick scratch: made for pgkick bench and demo, which may empty it' AS ours,
       to_regclass('pgqueuer') IS NOT NULL
         OR to_regclass('procrastinate_jobs') IS NOT NULL AS has_peer_tables;
