-- transaction_commit: Commits the transaction transaction_begin opened; statements after it in the pipeline run in a new one.
COMMIT;
