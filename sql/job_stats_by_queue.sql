-- job_stats_by_queue: Per queue: jobs by status, the oldest ready job's age, the next lease to expire, failures in the last day, whether it is paused, and ready jobs waiting past stranded_after with no worker watching (none in a paused queue: they wait for `pgkick resume`, not for a lost kick). A job is ready since its run_at, or since its last parent finished if later (a dependant released a moment ago keeps the run_at it was enqueued with: measured from it, the hours it waited on its parent read as hours ready, and fired OldestReadyJobAlarm).
SELECT queue,
       count(*) FILTER (WHERE status = 'queued')  AS queued,
       count(*) FILTER (WHERE status = 'queued'
                          AND run_at <= coalesce(%(now)s::timestamptz, now())) AS ready,
       count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status = 'done')    AS done,
       count(*) FILTER (WHERE status = 'failed')  AS failed,
       count(*) FILTER (WHERE status = 'failed'
                          AND finished_at > coalesce(%(now)s::timestamptz, now()) - interval '1 day')
                                                  AS failed_last_day,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now())
               - min(greatest(run_at, released.at))
                   FILTER (WHERE status = 'queued'
                             AND run_at <= coalesce(%(now)s::timestamptz, now())))
                                                  AS oldest_ready_seconds,
       min(locked_until) FILTER (WHERE status = 'running') AS next_lease_expiry,
       coalesce((SELECT l.paused FROM pgkick.queue_limits l WHERE l.queue = jobs.queue), false)
                                                  AS paused,
       count(*) FILTER (WHERE status = 'queued'
                          AND greatest(run_at, released.at)
                              <= coalesce(%(now)s::timestamptz, now())
                                 - %(stranded_after)s::interval
                          AND NOT coalesce((SELECT l.paused FROM pgkick.queue_limits l
                                            WHERE l.queue = jobs.queue), false)
                          AND NOT EXISTS (
                            SELECT 1 FROM pgkick.queue_watchers w
                            WHERE w.queue = jobs.queue
                              AND w.until > coalesce(%(now)s::timestamptz, now())
                              AND w.until <= coalesce(%(now)s::timestamptz, now())
                                             + interval '2 hours'))
                                                  AS stranded
FROM pgkick.jobs
LEFT JOIN LATERAL (  -- a queued job's parents' last finish (one index probe; others: none)
  SELECT max(p.finished_at) AS at
  FROM pgkick.job_dependencies AS d JOIN pgkick.jobs AS p ON p.id = d.parent_id
  WHERE jobs.status = 'queued' AND d.child_id = jobs.id
) AS released ON true
GROUP BY queue
ORDER BY queue;
