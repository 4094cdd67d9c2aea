-- job_purge_finished: Deletes up to batch done or failed jobs that finished more than retention ago; never queued or running ones, nor a parent one of whose dependants is not done (it may still run, or be retried, and read that parent's result; deleted, its link would go with it and the dependant run as if that parent had never been): that parent goes once its dependant finished, or once the failed dependant itself was purged; nor the newest job of a unique key while it is younger than the longest throttle (30 days, MAX_FLOW_PERIOD): a throttled enqueue answers with it, and purged, the key's next enqueue inside the period wrote a second job. Returns how many it deleted and whether any was a dependant (its parents may be purgeable now: the caller runs the next statement, so an old failed chain goes on one purge, dependants first, whatever the batch; job_purgeable_count counts it so).
WITH gone AS (
  DELETE FROM pgkick.jobs
  WHERE id IN (
    SELECT j.id FROM pgkick.jobs AS j
    WHERE j.status IN ('done', 'failed')
      AND j.finished_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval
      AND NOT (j.has_dependants AND EXISTS (
        SELECT 1 FROM pgkick.job_dependencies AS d JOIN pgkick.jobs AS c ON c.id = d.child_id
        WHERE d.parent_id = j.id AND c.status <> 'done'))
      AND NOT (j.unique_key IS NOT NULL  -- a throttle's answer (job_insert_flow): the key's newest
               AND j.created_at > coalesce(%(now)s::timestamptz, now()) - interval '30 days'
               AND NOT EXISTS (SELECT 1 FROM pgkick.jobs AS n
                               WHERE n.unique_key = j.unique_key AND n.id > j.id))
    LIMIT %(batch)s
  )
  RETURNING EXISTS (SELECT 1 FROM pgkick.job_dependencies AS d WHERE d.child_id = jobs.id)
    AS dependant
)
SELECT count(*)::int, coalesce(bool_or(dependant), false) FROM gone;
