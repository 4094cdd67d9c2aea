-- migration_search_path_set: Points unqualified names at pgkick's schema (then any schemas listed after it) until the end of the migration's transaction: pooler-safe, nothing outlives the COMMIT.
SELECT set_config('search_path', %(path)s, true);
