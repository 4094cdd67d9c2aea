-- 0010_job_complete_function: the completion UPDATE as one server-side function, job_complete(ids, attempts, results, now), called by the worker's flush (job_complete_many) and by its round trip (job_complete_and_claim, recreated to call it): the fenced UPDATE written once.
-- Why: the UPDATE that marks a batch done was written twice, in job_complete_many.sql and
-- inside 0008's job_complete_and_claim, and a change to one (the fence, the result, the
-- clock) had to be made to both. Now both call this function. Each job is fenced by its
-- own attempt (status 'running' and the attempts the caller claimed it with): a worker
-- whose lease was taken over changes nothing, and the ids returned are those it still
-- held. Its plan is kept per session, as the claim's (0007).
CREATE FUNCTION job_complete(done_ids bigint[], done_attempts int[], done_results text[],
                             done_now timestamptz)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $complete$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  UPDATE jobs j
  SET status = 'done', locked_until = NULL,
      finished_at = coalesce(done_now, now()),
      result = held.result::jsonb
  FROM unnest(done_ids, done_attempts, done_results) AS held(id, attempts, result)
  WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
  RETURNING j.id;
END
$complete$;

-- The round trip of 0008, its complete now this function's (the order, complete before
-- claim, is unchanged: 0008 says why it is the deadlock rule).
CREATE OR REPLACE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],
                                                  done_results text[], claim_queue text,
                                                  claim_batch int, claim_lease interval,
                                                  claim_now timestamptz)
RETURNS TABLE (id bigint, queue text, task text, payload jsonb, attempts int, max_attempts int)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $round$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int
  FROM job_complete(done_ids, done_attempts, done_results, claim_now) AS done;
  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);
END
$round$;
