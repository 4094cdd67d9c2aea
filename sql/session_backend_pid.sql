-- session_backend_pid: The server process this statement ran in: a pooler between client and server shows as a pid other than the one the connection was opened with.
SELECT pg_backend_pid();
