-- queue_limit_concurrency_set: Sets (or, with NULL, removes) how many jobs of one group key of a queue may run at once; set, the queue is claimed round-robin across its keys (migration 0014).
INSERT INTO pgkick.queue_limits (queue, concurrency) VALUES (%(queue)s, %(concurrency)s)
ON CONFLICT (queue) DO UPDATE SET concurrency = excluded.concurrency;
