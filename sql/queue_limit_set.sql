-- queue_limit_set: Sets the most jobs of a queue that may run at once (the claim enforces it).
INSERT INTO pgkick.queue_limits (queue, max_running) VALUES (%(queue)s, %(max_running)s)
ON CONFLICT (queue) DO UPDATE SET max_running = excluded.max_running;
