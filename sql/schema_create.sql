-- schema_create: Creates the schema that holds every pgkick object, if it is missing (the migrator owns it).
CREATE SCHEMA IF NOT EXISTS pgkick;
