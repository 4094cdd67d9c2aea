-- job_id_page_matching: Up to `limit` ids (and statuses) of the jobs a bulk action selects, in id order above a cursor: by statuses, task, queue, unique key, group, created range and error text (a substring, lower() against lower(): any case for ASCII letters, others as the database's LC_CTYPE folds them), and for a retry attempts below the limit (job_retry_failed leaves a job that used them all failed, so a dry run must not count it); read-only and lock-free (the action's own statement re-checks each job's status as it writes).
SELECT id, status
FROM pgkick.jobs
WHERE id > %(after)s::bigint
  AND status = ANY(%(statuses)s::text[])
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(unique_key)s::text IS NULL OR unique_key = %(unique_key)s::text)
  AND (%(group_key)s::text IS NULL OR group_key = %(group_key)s::text)
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s::timestamptz)
  AND (%(error)s::text IS NULL OR strpos(lower(last_error), lower(%(error)s::text)) > 0)
  AND (%(attempts_below)s::int IS NULL OR attempts < %(attempts_below)s::int)
ORDER BY id
LIMIT %(limit)s::int;
