-- queue_limit_clear: Removes a queue's running limit (its rate, concurrency and pause stay; queue_limit_prune drops a row left empty).
UPDATE pgkick.queue_limits SET max_running = NULL WHERE queue = %(queue)s;
