-- job_claim_naive: The article's WRONG claim (no row lock on the choice), marking the job done; kept only to show the race.
UPDATE pgkick.jobs
SET status = 'done', attempts = attempts + 1, finished_at = now()
WHERE id = (
  SELECT id FROM pgkick.jobs
  WHERE status = 'queued'
  ORDER BY run_at
  LIMIT 1
)
RETURNING id, attempts;
