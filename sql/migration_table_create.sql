-- migration_table_create: Creates the table that records which schema versions are applied.
CREATE TABLE IF NOT EXISTS pgkick.pgkick_migrations (
  version    int         PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);
