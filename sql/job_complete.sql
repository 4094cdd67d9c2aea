-- job_complete: Marks one running job done, only while this attempt still holds it (fenced; 0 rows = lease lost).
UPDATE pgkick.jobs
SET status = 'done', locked_until = NULL,
    finished_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;
