-- transaction_join: Nothing but a statement, sent on an app's connection that is not autocommit and has no transaction yet: psycopg opens the app's transaction (its BEGIN) before it, so pgkick's statements and savepoints that follow are the app's, kept or rolled back with its next commit() or rollback().
SELECT 1;
