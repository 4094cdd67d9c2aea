-- job_claim_serialise: Before a claim, in its transaction: if the queue has a running limit or live grouped jobs, waits for the queue's claim lock and marks the transaction serialised (job_claim reads the mark).
SELECT pg_advisory_xact_lock(hashtext('pgkick.claim'), hashtext(%(queue)s)),
       set_config('pgkick.claim_serialised', 'on', true)
WHERE EXISTS (SELECT 1 FROM pgkick.queue_limits WHERE queue = %(queue)s)
   OR EXISTS (SELECT 1 FROM pgkick.jobs
              WHERE queue = %(queue)s AND group_key IS NOT NULL AND status = 'queued')
   OR EXISTS (SELECT 1 FROM pgkick.jobs
              WHERE queue = %(queue)s AND group_key IS NOT NULL AND status = 'running');
