-- bench_search_path_set: Points this session's unqualified names at the schema pgkick_before_groups (the claim-order bench's table as it was before migration 0004).
SELECT set_config('search_path', 'pgkick_before_groups', false);
