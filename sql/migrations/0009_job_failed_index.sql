-- 0009_job_failed_index: the failed jobs, newest first, for `pgkick jobs --status failed` and the dashboard (a page of them, and each queue's count, without reading the finished history).
-- Partial: a row enters it only when its job ends failed (or is cancelled), so the
-- claim, the complete and the insert (the hot path) never write to it. Its queue is
-- included so that counting a queue's failures reads this index alone.
CREATE INDEX jobs_failed_idx ON jobs (id) INCLUDE (queue) WHERE status = 'failed';
