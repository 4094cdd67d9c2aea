-- 0037_job_continued_left_and_released_at: jobs.continued_left_ms, the time a job's invocation had left (less the worker's reserve) when it continued the job before any step ran (a stalled continuation): the stall guard lets a next step run whatever its estimate only on a claim with at least that much time left, so a job claimed late twice in a row continues again instead of overrunning its invocation.
-- Why (note 61's leftovers): the stall guard knew only that the last continuation came
-- before any step, not how late that claim was, so the next claim, late again, ran a
-- 10-minute step with 3 minutes left (on Lambda: killed at its timeout, the attempt charged).
-- NULL where nothing was recorded (a job never continued stalled, or stalled before this
-- migration): the guard then lets the step run, as before. A nullable column with no default
-- is catalog only: no table rewrite.
ALTER TABLE jobs ADD COLUMN continued_left_ms int;

-- A role that may record a continuation (the worker's: UPDATE of continued_stalled) may
-- record the time it had left (role_setup gives pgkick_worker its grant on a fresh install).
DO $grant$
DECLARE
  role_oid oid;
BEGIN
  FOR role_oid IN
    SELECT DISTINCT a.grantee
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'continued_stalled'
      AND a.privilege_type = 'UPDATE'
  LOOP
    EXECUTE format('GRANT UPDATE (continued_left_ms) ON jobs TO %s',
                   CASE WHEN role_oid = 0 THEN 'PUBLIC' ELSE role_oid::regrole::text END);
  END LOOP;
END
$grant$;
