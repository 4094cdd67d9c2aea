-- job_step_list: The steps a job finished (name, arguments' hash, result, duration, a sleep's seconds still to wait on the caller's clock), and whether its last continuation came before any step ran, with the time its invocation had left then (migration 0037): what a task's steps replay from; one row with a NULL name when it has none.
SELECT j.continued_stalled, j.continued_left_ms, s.name, s.args_hash, s.result, s.duration_ms,
       CASE WHEN s.wake_at IS NOT NULL  -- (greatest() would turn a step's NULL into 0)
            THEN greatest(extract(epoch FROM s.wake_at - coalesce(%(now)s::timestamptz, now())),
                          0)::float8
       END AS sleep_left
FROM pgkick.jobs AS j
LEFT JOIN pgkick.job_steps AS s ON s.job_id = j.id
WHERE j.id = %(id)s;
