-- role_setup: Creates the NOLOGIN roles pgkick_producer, pgkick_worker and pgkick_maintainer if missing, and grants each only what its part needs (grant them to your login roles).
DO $roles$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgkick_producer') THEN
    CREATE ROLE pgkick_producer NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgkick_worker') THEN
    CREATE ROLE pgkick_worker NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgkick_maintainer') THEN
    CREATE ROLE pgkick_maintainer NOLOGIN IN ROLE pgkick_worker;
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
