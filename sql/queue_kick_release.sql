-- queue_kick_release: Removes a pending kick that could not be sent, so the next producer kicks instead of trusting it.
DELETE FROM pgkick.queue_watchers WHERE queue = %(queue)s AND watcher = 'kick';
