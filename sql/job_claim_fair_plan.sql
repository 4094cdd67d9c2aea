-- job_claim_fair_plan: Has a new session compile the round-robin claim of queues with a rate or a concurrency (job_claim_fair_ids, migration 0023) and plan its walk, if any queue has one: a call for a batch of 0 on a queue no job can be in, which walks no key and writes nothing (no start, no cursor); a cold start's thread runs it beside the plain claim's (pgkick.worker.cold_start), so the first claim of a limited queue does not pay it. No queue with a limit: no call.
SELECT pgkick.job_claim_fair_ids('', 0, now(), NULL, NULL, 1)
WHERE EXISTS (SELECT 1 FROM pgkick.queue_limits l
              WHERE l.rate_limit IS NOT NULL OR l.concurrency IS NOT NULL);
