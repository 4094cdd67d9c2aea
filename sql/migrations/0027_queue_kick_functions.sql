-- 0027_queue_kick_functions: a kick is reserved and released through two functions run with their owner's rights (SECURITY DEFINER: queue_kick_reserve, queue_kick_release), and a producer keeps no right on queue_watchers itself: it can no longer write a watcher row, make a reservation longer than an hour, date one by a clock of its own, or delete a worker's announcement. Same answers for pgkick's own calls.
-- Why (the roles' review of 2026-12-05, left open by 0026): a producer reserved its kicks by
-- writing queue_watchers itself (insert, update, delete), so it could write any row there:
-- a fake worker or a pending kick with any `until` (0026's readers ignore rows more than two
-- hours ahead, so such a row held a queue's kicks back for up to two hours), delete a
-- lingering worker's announcement (spare kicks), or name the statement's clock. Through the
-- functions it writes only what a reservation writes: a 'kick' row for a queue nobody
-- watches, until now() plus its pending time, clamped to an hour (PGKICK_KICK_PENDING_MS's
-- own maximum); its clock is taken only from a session that is the functions' owner or one
-- of its members (tests inject one), as job_insert_flow's (0026); and a release deletes only
-- the 'kick' row. Workers keep their rights on the table: they announce, listen and
-- withdraw there, and reserve through the same function.
CREATE FUNCTION queue_kick_reserve(kick_queues text[], pending interval, reserve_now timestamptz)
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT
AS $reserve$
DECLARE
  at timestamptz := CASE WHEN reserve_now IS NOT NULL
                              AND pg_has_role(session_user, current_user, 'MEMBER')
                         THEN reserve_now ELSE now() END;
  lapse interval := least(greatest(pending, interval '0'), interval '1 hour');
BEGIN
  -- A reservation lost in a crash costs one spare kick: its commit need not wait for the disk.
  PERFORM set_config('synchronous_commit', 'off', true);
  RETURN QUERY
  WITH wanted AS (
    SELECT DISTINCT q AS queue FROM unnest(kick_queues) AS q
    WHERE NOT EXISTS (
      -- A watcher counts until its `until`, never more than two hours ahead: no announcement
      -- (PGKICK_WATCH_SECONDS) or reservation reaches past one hour from its writer's now()
      -- (another transaction's now() may be earlier: the second hour is the margin), so a
      -- row past it is none of pgkick's and holds nothing.
      SELECT 1 FROM queue_watchers l
      WHERE l.queue = q AND l.until > at AND l.until <= at + interval '2 hours'
    )
    AND NOT EXISTS (SELECT 1 FROM queue_limits p WHERE p.queue = q AND p.paused)
  ), reserved AS (
    INSERT INTO queue_watchers AS w (queue, watcher, until)
    SELECT wanted.queue, 'kick', at + lapse FROM wanted
    ON CONFLICT (queue, watcher) DO UPDATE SET until = excluded.until
      WHERE w.until <= at OR w.until > at + interval '2 hours'
    RETURNING w.queue
  ), woken AS (
    -- Only a worker that lingers has listening_until ahead (pgkick.worker.linger): a busy
    -- worker, a pending kick, or an idle queue gets no NOTIFY (delivered at the commit).
    SELECT count(pg_notify(l.channel, '')) AS n FROM queue_watchers l
    WHERE l.queue = ANY (kick_queues)
      AND l.listening_until > at
      AND l.until > at AND l.until <= at + interval '2 hours'
  )
  -- UNION ALL runs both branches to the end: the NOTIFYs are sent whether or not a kick was
  -- reserved (the woken branch itself returns no row).
  SELECT r.queue FROM reserved r
  UNION ALL
  SELECT NULL FROM woken WHERE woken.n < 0;
END
$reserve$;

CREATE FUNCTION queue_kick_release(kick_queue text)
RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT
AS $release$
  DELETE FROM queue_watchers WHERE queue = kick_queue AND watcher = 'kick';
$release$;

REVOKE ALL ON FUNCTION queue_kick_reserve(text[], interval, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION queue_kick_release(text) FROM PUBLIC;

-- The roles that reserved kicks by writing the table (role_setup's pgkick_producer and
-- pgkick_worker, or an install's own) now call the functions; of them, a role that may not
-- claim (update a job's status) keeps no right on the table.
DO $grant$
DECLARE
  grantee oid;
  role_name text;
  claims boolean;
BEGIN
  FOR grantee IN
    SELECT DISTINCT a.grantee
    FROM pg_catalog.pg_class AS t, LATERAL aclexplode(t.relacl) AS a
    WHERE t.oid = 'queue_watchers'::regclass AND a.privilege_type = 'INSERT'
      AND a.grantee <> t.relowner
  LOOP
    role_name := CASE WHEN grantee = 0 THEN 'PUBLIC' ELSE grantee::regrole::text END;
    EXECUTE format('GRANT EXECUTE ON FUNCTION queue_kick_reserve(text[], interval, timestamptz),'
                   ' queue_kick_release(text) TO %s', role_name);
    claims := CASE WHEN grantee = 0
                   THEN has_column_privilege('public', 'jobs', 'status', 'UPDATE')
                   ELSE has_column_privilege(grantee, 'jobs'::regclass, 'status', 'UPDATE') END;
    IF NOT claims THEN
      EXECUTE format('REVOKE ALL ON queue_watchers FROM %s', role_name);
    END IF;
  END LOOP;
END
$grant$;
