-- transaction_begin: Opens an explicit transaction inside a pipeline, so a COMMIT can end it before the statements that must see it committed.
BEGIN;
