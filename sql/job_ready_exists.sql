-- job_ready_exists: Says whether a queue has a job ready to run now (a worker out of time decides whether to hand over).
SELECT EXISTS (
  SELECT 1 FROM pgkick.jobs
  WHERE queue = %(queue)s AND status = 'queued'
    AND run_at <= coalesce(%(now)s::timestamptz, now())
);
