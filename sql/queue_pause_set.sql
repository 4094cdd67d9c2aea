-- queue_pause_set: Pauses or resumes a queue: a paused queue's claims take nothing and nobody kicks it (migration 0014).
INSERT INTO pgkick.queue_limits (queue, paused) VALUES (%(queue)s, %(paused)s)
ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused;
