-- job_parents_missing: Of the job ids given as parents (after=), those with no job in this schema: checked in the enqueue's transaction before its row is written, so an unknown parent writes nothing.
SELECT p
FROM unnest(%(ids)s::bigint[]) AS p
WHERE NOT EXISTS (SELECT 1 FROM pgkick.jobs j WHERE j.id = p)
ORDER BY p;
