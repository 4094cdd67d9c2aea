-- periodic_tick_purge: Deletes periodic ticks older than the retention, and never one younger than kept_at_least (as long as a tick can be delivered again: Scheduler's day of retries, Lambda's async queue, FailedKicksQueue's 14 days; pgkick.tasks.recurring.TICK_KEYS_KEPT).
DELETE FROM pgkick.periodic_ticks
WHERE tick_at < coalesce(%(now)s::timestamptz, now())
  - greatest(%(retention)s::interval, %(kept_at_least)s::interval);
