-- database_test_list: The names of the databases pgkick.testing's plugin made on this server (pgkick_test_*), whatever session made them: the next session drops those of a dead one.
SELECT datname FROM pg_database WHERE starts_with(datname, 'pgkick_test_') ORDER BY datname;
