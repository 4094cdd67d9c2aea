-- 0001_jobs: the article's jobs table (plus task and finished_at), its state-machine constraints and the partial ready index.
CREATE TABLE jobs (
  id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue        text        NOT NULL DEFAULT 'default',
  task         text        NOT NULL,
  payload      jsonb       NOT NULL,
  status       text        NOT NULL DEFAULT 'queued'
               CHECK (status IN ('queued', 'running', 'done', 'failed')),
  run_at       timestamptz NOT NULL DEFAULT now(),
  attempts     int         NOT NULL DEFAULT 0,
  max_attempts int         NOT NULL DEFAULT 5,
  locked_until timestamptz,
  last_error   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  finished_at  timestamptz,
  CONSTRAINT jobs_max_attempts_positive CHECK (max_attempts >= 1),
  CONSTRAINT jobs_attempts_within_max CHECK (attempts BETWEEN 0 AND max_attempts),
  CONSTRAINT jobs_lease_iff_running CHECK ((status = 'running') = (locked_until IS NOT NULL)),
  CONSTRAINT jobs_finished_iff_final CHECK ((status IN ('done', 'failed')) = (finished_at IS NOT NULL)),
  CONSTRAINT jobs_queue_named CHECK (queue <> ''),
  CONSTRAINT jobs_task_named CHECK (task <> '')
);

-- Only the rows workers look for: stays small however long the finished history grows.
CREATE INDEX jobs_ready_idx ON jobs (queue, run_at) WHERE status = 'queued';
