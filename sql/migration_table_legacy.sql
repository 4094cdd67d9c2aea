-- migration_table_legacy: The schema of a pgkick_migrations table the session's own search_path finds outside pgkick's schema, while pgkick's schema has none: an install from before 0006 (its tables in the role's default schema, usually public), to move, unless that ledger records 0006 (MigrationStore.ledger_elsewhere asks it): then another install, beside which the new one is made.
SELECT n.nspname AS legacy_schema
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass('pgkick_migrations')
  AND n.nspname <> %(schema)s
  AND to_regclass(quote_ident(%(schema)s) || '.pgkick_migrations') IS NULL;
