-- database_session_release: Release a test session's advisory lock taken by database_session_claim (a dead session's, taken to drop its databases, or the session's own at its end).
SELECT pg_advisory_unlock(%(space)s::int4, %(session)s::int4);
