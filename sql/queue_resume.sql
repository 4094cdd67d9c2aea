-- queue_resume: Resumes a paused queue (its claims take jobs again); returns the queue, or no row when it was not paused (nothing written).
UPDATE pgkick.queue_limits SET paused = false
WHERE queue = %(queue)s AND paused
RETURNING queue;
