-- job_released_queues: The queues that jobs waiting on others entered in this transaction, newline-separated, NULL when none (migration 0017's transaction-local pgkick.released_queues): read after a statement that ended their parents (a cancel), before the commit, to kick them.
SELECT nullif(current_setting('pgkick.released_queues', true), '');
