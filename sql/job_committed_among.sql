-- job_committed_among: Which of the given job ids exist (committed, not rolled back with a savepoint), with their queue and due time.
SELECT id, queue, run_at FROM pgkick.jobs WHERE id = ANY(%(ids)s::bigint[]);
