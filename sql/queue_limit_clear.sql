-- queue_limit_clear: Removes a queue's running limit.
DELETE FROM pgkick.queue_limits WHERE queue = %(queue)s;
