-- migration_record: Records one applied schema version.
INSERT INTO pgkick.pgkick_migrations (version, name) VALUES (%(version)s, %(name)s);
