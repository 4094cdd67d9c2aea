-- queue_kick_reserve: Of the queues given, returns those that nobody watches and that are not paused, marking each with a pending kick; the caller kicks exactly those. A worker lingering on one of them with a channel is NOTIFYed (delivered at this commit). Through the SECURITY DEFINER function of migration 0027: a producer has no right on queue_watchers itself.
SELECT q FROM pgkick.queue_kick_reserve(%(queues)s::text[], %(pending)s::interval,
                                        %(now)s::timestamptz) AS q;
