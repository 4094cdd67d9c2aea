-- job_step_record: Stores one finished step's JSON result (or a sleep's end, now + sleep seconds) with its job, only while this attempt holds the job (fenced: the job row is share-locked and checked running under this attempt; 0 rows = the lease was lost, nothing written); returns the result as stored, which the first run hands back as a replay would read it.
INSERT INTO pgkick.job_steps (job_id, name, args_hash, result, attempt, duration_ms, wake_at,
                              created_at)
SELECT j.id, %(name)s, %(args_hash)s, %(result)s::jsonb, j.attempts, %(duration_ms)s,
       coalesce(%(now)s::timestamptz, now()) + %(sleep)s::float8 * interval '1 second',
       coalesce(%(now)s::timestamptz, now())
FROM pgkick.jobs AS j
WHERE j.id = %(id)s AND j.status = 'running' AND j.attempts = %(attempts)s
FOR SHARE OF j
ON CONFLICT (job_id, name) DO NOTHING
RETURNING result;
