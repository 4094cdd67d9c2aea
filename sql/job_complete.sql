-- job_complete: Marks one running job done, only while this attempt still holds it (fenced; 0 rows = lease lost): the server-side job_complete of migration 0010, for one job with no result; with the queues its dependants entered (migration 0017), NULL when none.
SELECT id, nullif(current_setting('pgkick.released_queues', true), '')
FROM pgkick.job_complete(ARRAY[%(id)s]::bigint[], ARRAY[%(attempts)s]::int[], NULL::text[],
                         %(now)s::timestamptz);
