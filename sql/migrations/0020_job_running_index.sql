-- 0020_job_running_index: one index of the running jobs, on (queue, group_key), in place of 0004's two (jobs_running_idx on queue, jobs_group_running_idx on grouped jobs): a group's running count can no longer be planned through the queue-wide one, and a claim writes one running index entry, not two.
-- Why: the round-robin claim (0014) counts each candidate group's running jobs in a plan
-- kept by the session (generic). When the statistics had seen no running job, both
-- partial indexes looked equally cheap and the plan could take the queue-wide one, then
-- read every running job of the queue (a heap fetch each, to filter on group_key) for
-- every key of every claim: 0.095 ms a key at 1,000 running jobs, a claim-and-complete
-- cycle of 2.3 ms against 1.1 ms with none (docs/guide/flow-control.md). With one index
-- there is no wrong one to pick:
-- - a queue's running count (its limit, the hand-over's checks) scans the queue's prefix,
--   as jobs_running_idx did;
-- - a group's running count reads that group's entries only;
-- - the plain claim's "any grouped job running?" (min(group_key) ... IS NOT NULL) stops at
--   the first entry: NULLs sort last, and IS NOT NULL ends a forward scan at the first NULL.
DROP INDEX jobs_running_idx;
DROP INDEX jobs_group_running_idx;
CREATE INDEX jobs_running_idx ON jobs (queue, group_key) WHERE status = 'running';
