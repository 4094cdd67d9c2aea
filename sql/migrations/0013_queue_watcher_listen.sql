-- 0013_queue_watcher_listen: a lingering worker's wake-up channel, so a producer whose kick reservation finds it NOTIFYs it instead of leaving the job to its next pause.
-- Both stay NULL for a pending kick and for a worker that is not listening (behind a
-- transaction-mode pooler, or with PGKICK_WORKER_LISTEN=off): producers notify only a
-- row whose listening_until is still ahead, so a worker that went back to work stops
-- being notified when its window ends, without a write of its own.
ALTER TABLE queue_watchers
  ADD COLUMN channel text,                  -- what the worker LISTENs on (pgkick.worker.linger)
  ADD COLUMN listening_until timestamptz;   -- past this instant, no NOTIFY for this worker
