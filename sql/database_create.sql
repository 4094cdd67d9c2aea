-- database_create: A database for pgkick.testing's pytest plugin; the names are placeholders the plugin replaces by generated, quoted ones.
CREATE DATABASE pgkick_test_db;
