-- 0025_function_search_path_pg_temp_last: every pgkick function searches pg_temp last (search_path = the schema, then pg_temp), so no caller's temporary table or function shadows pgkick's inside them; migrations now run with the same path, so functions made later by `SET search_path FROM CURRENT` carry it too.
-- Why: PostgreSQL searches pg_temp first when a search_path does not name it, and 0015, 0017,
-- 0019 and 0024 gave their functions the schema alone. job_await and job_insert_flow are
-- SECURITY DEFINER and executable by pgkick_producer: a producer's temporary table `jobs`,
-- with a trigger of its own, was the table they read and wrote, and its trigger ran as
-- their owner, the role that migrated (any SQL at its rights). The dependency triggers'
-- functions (0017, 0019) were open the same way to a worker or an operator. The functions
-- run with their caller's rights (the claim, the completions) get the same path: one rule
-- for every function of the schema, and a temporary table named like pgkick's cannot
-- misdirect a worker's own claim either. (job_ordered_at_set, 0011, has no path and gets
-- none: a trigger run with its caller's rights that names no table; a SET clause would cost
-- every grouped insert a save and restore of the setting.)
DO $path$
DECLARE
  fn regprocedure;
BEGIN
  FOR fn IN
    SELECT p.oid::regprocedure
    FROM pg_proc p
    WHERE p.pronamespace = current_schema()::regnamespace
      AND EXISTS (SELECT FROM unnest(p.proconfig) AS c WHERE c LIKE 'search\_path=%')
      AND NOT EXISTS (SELECT FROM pg_depend d
                      WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                        AND d.deptype = 'e')
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
  END LOOP;
END
$path$;
