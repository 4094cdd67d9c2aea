-- queue_kick_release: Removes a pending kick that could not be sent, so the next producer kicks instead of trusting it (migration 0027's function: the 'kick' row alone).
SELECT pgkick.queue_kick_release(%(queue)s);
