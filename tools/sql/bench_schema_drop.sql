-- bench_schema_drop: Drops the schema pgkick_before_groups the claim-order bench made.
DROP SCHEMA IF EXISTS pgkick_before_groups CASCADE;
