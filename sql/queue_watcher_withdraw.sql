-- queue_watcher_withdraw: A worker leaving a queue removes its announcement (it then claims once more before it exits).
DELETE FROM pgkick.queue_watchers WHERE queue = %(queue)s AND watcher = %(watcher)s;
