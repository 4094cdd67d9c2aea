-- The role set-up as pgkick shipped it up to migration 0003 (tables in the role's default schema): what test_schema_move grants before an upgrade.
-- Roles are cluster-wide and the migration lock is per database: a set-up running at once in
-- another database may create a role between our look and our CREATE, so a duplicate is
-- caught (in its own subtransaction) and taken as done.
DO $roles$
DECLARE
  role_name text;
BEGIN
  FOREACH role_name IN ARRAY ARRAY['pgkick_producer', 'pgkick_worker', 'pgkick_maintainer'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = role_name) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
      EXCEPTION WHEN duplicate_object OR unique_violation THEN
        NULL;  -- created meanwhile by a set-up in another database
      END;
    END IF;
  END LOOP;
  IF NOT pg_has_role('pgkick_maintainer', 'pgkick_worker', 'MEMBER') THEN
    BEGIN
      GRANT pgkick_worker TO pgkick_maintainer;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;
    END;
  END IF;
END
$roles$;

REVOKE ALL ON jobs, pgkick_migrations FROM PUBLIC;
GRANT SELECT ON pgkick_migrations TO pgkick_producer, pgkick_worker;

-- The app: insert jobs, and read back only what the insert returns (never payloads or status).
GRANT INSERT (queue, task, payload, run_at, max_attempts) ON jobs TO pgkick_producer;
GRANT SELECT (id, queue, run_at) ON jobs TO pgkick_producer;

-- Workers: claim, complete, fail, extend.
GRANT SELECT ON jobs TO pgkick_worker;
GRANT UPDATE (status, attempts, run_at, locked_until, last_error, finished_at, claimed_at)
  ON jobs TO pgkick_worker;

-- The reaper and operators: also retry (more attempts), purge and cancel.
GRANT UPDATE (max_attempts), DELETE ON jobs TO pgkick_maintainer;

-- Who watches which queue: producers reserve kicks, workers announce and withdraw.
REVOKE ALL ON queue_watchers FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON queue_watchers TO pgkick_producer, pgkick_worker;
