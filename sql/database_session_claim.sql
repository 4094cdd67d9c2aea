-- database_session_claim: Take a test session's advisory lock, on the session's own connection, held until it ends (or its process dies and the server ends the connection): pgkick.testing's mark that the session's pgkick_test_* databases are in use; false when another session holds it.
SELECT pg_try_advisory_lock(%(space)s::int4, %(session)s::int4);
