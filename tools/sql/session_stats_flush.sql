-- session_stats_flush: Makes this session's pending statistics (its own connection among them) reach pg_stat_database at the end of this statement.
SELECT pg_stat_force_next_flush();
