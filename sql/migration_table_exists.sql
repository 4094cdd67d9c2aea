-- migration_table_exists: Says whether pgkick's migrations table exists here, without creating anything.
SELECT to_regclass(quote_ident(%(schema)s) || '.pgkick_migrations') IS NOT NULL AS exists;
