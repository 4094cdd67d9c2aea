-- job_purge_finished: Deletes up to batch done or failed jobs that finished more than retention ago; never queued or running ones.
DELETE FROM pgkick.jobs
WHERE id IN (
  SELECT id FROM pgkick.jobs
  WHERE status IN ('done', 'failed')
    AND finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
  LIMIT %(batch)s
);
