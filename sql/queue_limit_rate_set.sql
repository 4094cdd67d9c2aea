-- queue_limit_rate_set: Sets (or, with NULLs, removes) a queue's rate: at most rate_limit jobs of each rate key started per sliding rate_period (the claim enforces it, migration 0014).
INSERT INTO pgkick.queue_limits (queue, rate_limit, rate_period)
VALUES (%(queue)s, %(rate_limit)s, %(rate_period)s::interval)
ON CONFLICT (queue) DO UPDATE
SET rate_limit = excluded.rate_limit, rate_period = excluded.rate_period;
