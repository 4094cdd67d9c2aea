-- role_setup: Creates the NOLOGIN roles pgkick_producer, pgkick_worker and pgkick_maintainer if missing, and grants each only what its part needs (grant them to your login roles).
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

-- Every role reaches pgkick's tables through its schema (pgkick_maintainer by pgkick_worker).
GRANT USAGE ON SCHEMA pgkick TO pgkick_producer, pgkick_worker;

REVOKE ALL ON pgkick.jobs, pgkick.pgkick_migrations FROM PUBLIC;
GRANT SELECT ON pgkick.pgkick_migrations TO pgkick_producer, pgkick_worker;

-- The app: insert jobs, and read back only what the insert returns (never payloads or status).
GRANT INSERT (queue, task, payload, run_at, max_attempts, priority, group_key, unique_key,
              traceparent, tracestate)
  ON pgkick.jobs TO pgkick_producer;
GRANT SELECT (id, queue, run_at) ON pgkick.jobs TO pgkick_producer;
-- Unique keys: a skipped duplicate reads back the newest job with its key.
GRANT SELECT (unique_key) ON pgkick.jobs TO pgkick_producer;

-- Debounce and throttle (migration 0015): a function that may replace the payload of its
-- key's queued job and read the key's newest one, so the producer reads and updates nothing.
-- Workers call it too: a task enqueues its follow-ups on its worker's connection.
REVOKE ALL ON FUNCTION pgkick.job_insert_flow(text, text, jsonb, timestamptz, interval, int, int,
                                             text, text, text, text, interval, interval,
                                             interval, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_insert_flow(text, text, jsonb, timestamptz, interval, int,
                                                int, text, text, text, text, interval,
                                                interval, interval, timestamptz)
  TO pgkick_producer, pgkick_worker;

-- Workers: claim, complete, fail, extend.
GRANT SELECT ON pgkick.jobs TO pgkick_worker;
GRANT UPDATE (status, attempts, run_at, locked_until, last_error, finished_at, claimed_at,
               result)
  ON pgkick.jobs TO pgkick_worker;

-- The claim, the complete and the round trip are functions (migrations 0007, 0010, 0008), run
-- with their caller's rights: only workers call them.
REVOKE ALL ON FUNCTION pgkick.job_claim(text, int, interval, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_claim(text, int, interval, timestamptz) TO pgkick_worker;
REVOKE ALL ON FUNCTION pgkick.job_complete(bigint[], int[], text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_complete(bigint[], int[], text[], timestamptz)
  TO pgkick_worker;
REVOKE ALL ON FUNCTION pgkick.job_complete_and_claim(bigint[], int[], text[], text, int, interval,
                                                    timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_complete_and_claim(bigint[], int[], text[], text, int, interval,
                                                        timestamptz) TO pgkick_worker;

-- Jobs that wait for others (migration 0017): producers and spawning tasks link a job to its
-- parents through job_await (SECURITY DEFINER: it flags and reads parents they may not);
-- workers read parents' results and the dependants their failures released, and insert the
-- children a task spawns with every option an app's enqueue has, with ids reserved from the
-- jobs' sequence while the task ran (pgkick.worker.spawn: the insert commits with the
-- spawning job's completion, and the task has named the ids already).
REVOKE ALL ON pgkick.job_dependencies FROM PUBLIC;
GRANT SELECT ON pgkick.job_dependencies TO pgkick_worker;
REVOKE ALL ON FUNCTION pgkick.job_await(bigint[], bigint[], text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.job_await(bigint[], bigint[], text[], timestamptz)
  TO pgkick_producer, pgkick_worker;
GRANT INSERT (id, run_at, priority, group_key, unique_key, traceparent, tracestate, rate_key)
  ON pgkick.jobs TO pgkick_worker;
GRANT USAGE ON SEQUENCE pgkick.jobs_id_seq TO pgkick_worker;

-- The reaper and operators: also retry (more attempts), purge and cancel.
GRANT UPDATE (max_attempts, cancel_requested_at), DELETE ON pgkick.jobs TO pgkick_maintainer;

-- Periodic tasks: a scheduled tick inserts its job from the worker (pgkick.periodic); the
-- reaper purges old ticks.
REVOKE ALL ON pgkick.periodic_ticks FROM PUBLIC;
GRANT SELECT, INSERT ON pgkick.periodic_ticks TO pgkick_worker;
GRANT INSERT (queue, task, payload, max_attempts) ON pgkick.jobs TO pgkick_worker;
GRANT DELETE ON pgkick.periodic_ticks TO pgkick_maintainer;

-- Who watches which queue: workers announce, listen and withdraw there. Producers have no
-- right on the table (one set up before migration 0027 loses its rights here too).
REVOKE ALL ON pgkick.queue_watchers FROM PUBLIC, pgkick_producer;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgkick.queue_watchers TO pgkick_worker;

-- Producers and workers reserve and release kicks through two functions (migration 0027)
-- that write a reservation's row and no other, with the server's clock, for an hour at most.
REVOKE ALL ON FUNCTION pgkick.queue_kick_reserve(text[], interval, timestamptz),
                       pgkick.queue_kick_release(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgkick.queue_kick_reserve(text[], interval, timestamptz),
                          pgkick.queue_kick_release(text)
  TO pgkick_producer, pgkick_worker;

-- Per-queue running limits: workers read them in every claim; operators set them.
REVOKE ALL ON pgkick.queue_limits FROM PUBLIC;
GRANT SELECT ON pgkick.queue_limits TO pgkick_worker;
GRANT INSERT, UPDATE, DELETE ON pgkick.queue_limits TO pgkick_maintainer;

-- Flow control (migration 0014): a producer names rate keys and kicks no paused queue
-- (queue_kick_reserve reads the flag); the claim records starts and where its round robin
-- left off, and a sweep reads the starts.
GRANT INSERT (rate_key) ON pgkick.jobs TO pgkick_producer;
GRANT SELECT (queue, paused) ON pgkick.queue_limits TO pgkick_producer;
REVOKE ALL ON pgkick.job_starts, pgkick.queue_claim_cursors FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON pgkick.job_starts TO pgkick_worker;
GRANT SELECT, INSERT, UPDATE ON pgkick.queue_claim_cursors TO pgkick_worker;
GRANT DELETE ON pgkick.queue_claim_cursors TO pgkick_maintainer;

-- Durable steps (migration 0018): workers read and write a job's steps, and count its
-- continuations (and a stalled one's time left, 0037); the purge deletes them with their job (ON DELETE CASCADE).
REVOKE ALL ON pgkick.job_steps FROM PUBLIC;
GRANT SELECT, INSERT ON pgkick.job_steps TO pgkick_worker;
GRANT UPDATE (continued, continued_stalled, continued_left_ms) ON pgkick.jobs TO pgkick_worker;

-- Suspects (migration 0035): a worker marks one started (lapsed); its rescue reaps as the
-- worker, and gives a suspect that never started its attempt back (max_attempts + 1).
GRANT UPDATE (lapsed, max_attempts) ON pgkick.jobs TO pgkick_worker;

-- Operators cancel waiting jobs too (migration 0017): the cancel clears a job's count of
-- parents, waiting_on (without it, no cancel by pgkick_maintainer ran at all).
GRANT UPDATE (waiting_on) ON pgkick.jobs TO pgkick_maintainer;
