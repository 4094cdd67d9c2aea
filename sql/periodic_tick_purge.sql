-- periodic_tick_purge: Deletes periodic ticks older than the retention (the scheduler redelivers within minutes, never days later).
DELETE FROM pgkick.periodic_ticks
WHERE tick_at < coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval;
