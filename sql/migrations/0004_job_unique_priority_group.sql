-- 0004_job_unique_priority_group: unique keys, priorities, ordered groups and per-queue running limits (issue 16).
ALTER TABLE jobs
  ADD COLUMN priority   smallint NOT NULL DEFAULT 0,
  ADD COLUMN unique_key text,
  ADD COLUMN group_key  text,
  ADD CONSTRAINT jobs_priority_range CHECK (priority BETWEEN -100 AND 100),
  ADD CONSTRAINT jobs_unique_key_named CHECK (unique_key <> ''),
  ADD CONSTRAINT jobs_group_named CHECK (group_key <> '');

-- Highest priority first, then run_at: the claim reads the queue in this order.
DROP INDEX jobs_ready_idx;
CREATE INDEX jobs_ready_idx ON jobs (queue, priority DESC, run_at) WHERE status = 'queued';

-- At most one live (queued or running) job per unique key: the insert's ON CONFLICT target.
CREATE UNIQUE INDEX jobs_unique_live_idx ON jobs (unique_key)
  WHERE unique_key IS NOT NULL AND status IN ('queued', 'running');
-- A skipped duplicate's answer: the newest job with its key (needs no status, which a
-- producer may not read).
CREATE INDEX jobs_unique_key_idx ON jobs (unique_key, id) WHERE unique_key IS NOT NULL;

-- A group's head (its first queued job in claim order: priority, run_at, id), whether one
-- of its jobs runs, and whether one waits for a retry (it holds the group): each a probe
-- of a small partial index. (-priority): one ascending row comparison finds the head.
CREATE INDEX jobs_group_queued_idx ON jobs (queue, group_key, (-priority), run_at, id)
  WHERE group_key IS NOT NULL AND status = 'queued';
CREATE INDEX jobs_group_running_idx ON jobs (queue, group_key)
  WHERE group_key IS NOT NULL AND status = 'running';
CREATE INDEX jobs_group_retrying_idx ON jobs (queue, group_key)
  WHERE group_key IS NOT NULL AND status = 'queued' AND attempts > 0;

-- Running jobs of a queue, counted against its limit.
CREATE INDEX jobs_running_idx ON jobs (queue) WHERE status = 'running';

-- The most jobs of a queue running at once; no row: no limit.
CREATE TABLE queue_limits (
  queue       text PRIMARY KEY CHECK (queue <> ''),
  max_running int  NOT NULL CHECK (max_running >= 1)
);
