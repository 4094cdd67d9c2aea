-- job_step_list_shown: A job's durable steps for an operator (`pgkick job ID`, the dashboard's job page), in the order they finished (by name within one instant): name, the attempt that wrote each, its duration, a sleep's end, and the stored result as JSON text cut to 200 characters (a step's result may be large); the first 100.
SELECT name, attempt, duration_ms, wake_at, created_at,
       left(result::text, 200) AS result,
       length(result::text) > 200 AS result_cut
FROM pgkick.job_steps
WHERE job_id = %(id)s
ORDER BY created_at, name
LIMIT 100;
