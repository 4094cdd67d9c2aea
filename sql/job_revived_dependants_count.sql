-- job_revived_dependants_count: How many dependants retries revived in this transaction (migration 0019's trigger adds them up in the transaction-local pgkick.revived_dependants; 0 when none): read after the retry, before its commit.
SELECT coalesce(nullif(current_setting('pgkick.revived_dependants', true), ''), '0')::int
