-- database_clone: One test's own database, a copy of the plugin's migrated template (pgkick.testing.databases replaces both placeholder names by generated, quoted ones).
CREATE DATABASE pgkick_test_db TEMPLATE pgkick_test_template;
