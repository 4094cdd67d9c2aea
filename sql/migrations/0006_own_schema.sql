-- 0006_own_schema: moves the tables of an install from before this version (with their rows, indexes, constraints, identity sequence and grants) from the role's default schema into pgkick's own, where 0001-0003 now create them; lets the pgkick roles that exist use that schema.
-- pgkick.schema.migrate runs this first of all on such an install, with search_path set to
-- pgkick's schema then the old one: a table found outside current_schema() is an old one.
-- On a fresh install everything is already in current_schema(): nothing moves (and no
-- table is locked for a no-op SET SCHEMA).
DO $move$
DECLARE
  table_name text;
  role_name text;
  found regclass;
BEGIN
  FOREACH table_name IN ARRAY ARRAY['pgkick_migrations', 'jobs', 'queue_watchers'] LOOP
    found := to_regclass(quote_ident(table_name));
    IF found IS NOT NULL AND (
      SELECT n.nspname FROM pg_catalog.pg_class AS c
      JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
      WHERE c.oid = found
    ) <> current_schema() THEN
      EXECUTE format('ALTER TABLE %s SET SCHEMA %I', found, current_schema());
    END IF;
  END LOOP;
  -- Roles set up before this version keep working without `pgkick migrate --roles` again.
  FOREACH role_name IN ARRAY ARRAY['pgkick_producer', 'pgkick_worker'] LOOP
    IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = role_name) THEN
      EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), role_name);
    END IF;
  END LOOP;
END
$move$;
