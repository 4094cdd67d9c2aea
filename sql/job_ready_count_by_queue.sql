-- job_ready_count_by_queue: Counts the jobs ready to run now in each queue (which queues need a worker).
SELECT queue, count(*) AS ready
FROM pgkick.jobs
WHERE status = 'queued' AND run_at <= coalesce(%(now)s::timestamptz, now())
GROUP BY queue
ORDER BY queue;
