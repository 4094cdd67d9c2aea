-- job_list_page: One page of jobs, newest first: ids below the cursor (after) and at or above the floor (a bound on how many ids a page may look at), filtered by status, task, queue, unique key, group, created range and error text (the same filters a bulk retry, cancel or purge takes); for `pgkick jobs` and the dashboard (keyset paging on the primary key or a partial index, never a count).
SELECT id, queue, task, status, attempts, max_attempts, priority, unique_key, group_key,
       run_at, created_at, claimed_at, finished_at, locked_until, last_error
FROM pgkick.jobs
WHERE (%(after)s::bigint IS NULL OR id < %(after)s::bigint)
  AND (%(floor)s::bigint IS NULL OR id >= %(floor)s::bigint)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(unique_key)s::text IS NULL OR unique_key = %(unique_key)s::text)
  AND (%(group_key)s::text IS NULL OR group_key = %(group_key)s::text)
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s::timestamptz)
  AND (%(error)s::text IS NULL OR strpos(lower(last_error), lower(%(error)s::text)) > 0)
ORDER BY id DESC
LIMIT %(limit)s::int;
