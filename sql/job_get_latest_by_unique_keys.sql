-- job_get_latest_by_unique_keys: For each unique key, its newest job (the one holding the key, if any does: a job with the key is only inserted while none is live).
SELECT DISTINCT ON (unique_key) id, queue, run_at, unique_key
FROM pgkick.jobs
WHERE unique_key = ANY(%(unique_keys)s::text[])
ORDER BY unique_key, id DESC;
