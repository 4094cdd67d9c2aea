-- bench_schema_create: Creates the schema pgkick_before_groups, where the claim-order bench keeps a jobs table as it was before migration 0004.
CREATE SCHEMA pgkick_before_groups;
