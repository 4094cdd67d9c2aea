-- migration_lock: Serialises concurrent migrators until the end of the current transaction.
SELECT pg_advisory_xact_lock(hashtext('pgkick.migrate'));
