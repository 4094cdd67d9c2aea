-- 0008_job_complete_and_claim_function: a worker's round trip as one server-side call, job_complete_and_claim(ids, attempts, results, queue, batch, lease, now): the last batch's fenced complete, then the claim of the next (issue 18's drain).
-- Why (pgkick.store, complete_many_and_claim): the worker completed a batch and claimed the
-- next as two statements in one pipeline, and on a 2-core machine the client's cost of a
-- statement (its parameters, its cursor, its results) was most of the worker's CPU a job.
-- One call is one statement a round trip, and its complete is planned once a session, as
-- the claim's statements are (0007), where it was planned at every call before.
-- The order is the deadlock rule: the complete runs, and takes its row locks, before the
-- claim, as two statements in order do; one statement with both as CTEs would leave the
-- order to the executor (pgkick.store says what deadlocked). The rows returned: first each
-- completed job still held by this attempt, as its id with every other column NULL (a
-- claimed job always has a task), then the claimed jobs in claim order.
CREATE FUNCTION job_complete_and_claim(done_ids bigint[], done_attempts int[],
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
  WITH done AS (
    UPDATE jobs j
    SET status = 'done', locked_until = NULL,
        finished_at = coalesce(claim_now, now()),
        result = held.result::jsonb
    FROM unnest(done_ids, done_attempts, done_results) AS held(id, attempts, result)
    WHERE j.id = held.id AND j.status = 'running' AND j.attempts = held.attempts
    RETURNING j.id
  )
  SELECT done.id, NULL::text, NULL::text, NULL::jsonb, NULL::int, NULL::int FROM done;
  RETURN QUERY SELECT * FROM job_claim(claim_queue, claim_batch, claim_lease, claim_now);
END
$round$;
