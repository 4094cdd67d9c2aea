-- procrastinate_schema_exists: Whether procrastinate's schema is installed in this database (the peer benchmark installs it once).
SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS installed;
