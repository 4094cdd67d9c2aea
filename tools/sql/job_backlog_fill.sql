-- job_backlog_fill: Fills a queue (default unless named) with count ready jobs, due a millisecond apart in the past, with priorities spread over -5..5 (or all 0) and groups interleaved (n mod groups; none when groups is 0).
INSERT INTO pgkick.jobs (queue, task, payload, run_at, priority, group_key)
SELECT coalesce(%(queue)s::text, 'default'), 'noop', '{}', now() - interval '1 day' + n * interval '1 millisecond',
       CASE WHEN %(priorities)s::boolean THEN (n %% 11) - 5 ELSE 0 END,
       CASE WHEN %(groups)s::int > 0 AND n %% 2 = 0 THEN 'g' || (n %% %(groups)s::int) END
FROM generate_series(1, %(count)s::int) AS n;
