-- job_notify_listeners: Tells LISTENing workers that a queue has work (the article's trigger, sent by the producer in the comparison).
SELECT pg_notify('pgkick_jobs', %(queue)s);
