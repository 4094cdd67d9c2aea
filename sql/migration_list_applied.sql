-- migration_list_applied: Lists the schema versions already applied, oldest first.
SELECT version FROM pgkick.pgkick_migrations ORDER BY version;
