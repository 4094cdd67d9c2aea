-- queue_limits_clear_all: Removes every queue's limits, rates' starts and round-robin cursors (the bench's reset between variants).
WITH starts AS (DELETE FROM pgkick.job_starts), cursors AS (DELETE FROM pgkick.queue_claim_cursors)
DELETE FROM pgkick.queue_limits;
