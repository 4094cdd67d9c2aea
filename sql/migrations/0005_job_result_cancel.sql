-- 0005_job_result_cancel: a task's result stored with its job, an operator's request to cancel a running job, and the periodic ticks already enqueued.
ALTER TABLE jobs ADD COLUMN result jsonb;
-- Set by `pgkick cancel` on a running job; the worker's heartbeat reads it back.
ALTER TABLE jobs ADD COLUMN cancel_requested_at timestamptz;

-- One row per periodic task per scheduled instant: the scheduler delivers at least once,
-- the job is inserted at most once (the tick's INSERT ... ON CONFLICT DO NOTHING and the
-- job's INSERT are one statement: periodic_tick_enqueue).
CREATE TABLE periodic_ticks (
  name     text        NOT NULL,
  tick_at  timestamptz NOT NULL,
  PRIMARY KEY (name, tick_at)
);
