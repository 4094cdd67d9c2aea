-- 0018_job_steps: durable steps (job.step, job.sleep): each step's JSON result stored with its job, written only by the attempt that holds it, so a retry or a continuation replays finished steps instead of running them again; and each job's continuations (a fresh invocation taking over when the time left is too short for its next step).
-- One row per step a job finished. Why a table, not a jsonb column on jobs: a step write
-- is one small INSERT (never a rewrite of the job's row and its payload, never a dead
-- version of it), and a job of 500 steps does not make every claim read 500 results.
-- Deleted with its job (purge).
CREATE TABLE job_steps (
  job_id      bigint      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  name        text        NOT NULL,
  args_hash   text        NOT NULL,   -- sha256 of the arguments' JSON: a name reused with others is refused
  result      jsonb,                  -- what the step's function returned (NULL for None)
  attempt     int         NOT NULL,   -- the attempt that wrote it (the fencing token then)
  duration_ms int         NOT NULL,   -- on the invocation's own clock: the next step's estimate
  wake_at     timestamptz,            -- a sleep's end (job.sleep); NULL for a step
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (job_id, name)
);

-- How many times the job was continued (re-queued by the time budget, no attempt used),
-- and whether its last continuation came before any step ran in that invocation (it was
-- claimed too late for its next step). Such a job runs its next step whatever the estimate:
-- a step longer than a whole invocation would otherwise be continued for ever.
ALTER TABLE jobs
  ADD COLUMN continued         int     NOT NULL DEFAULT 0,
  ADD COLUMN continued_stalled boolean NOT NULL DEFAULT false;
