-- database_drop: Drop a database pgkick.testing's plugin created, ending its sessions (a worker or a lingering producer connection of the test); the name is a placeholder replaced by the plugin.
DROP DATABASE IF EXISTS pgkick_test_db WITH (FORCE);
