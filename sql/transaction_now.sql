-- transaction_now: The instant the statements of the current transaction see as now() (or the caller's clock, %(now)s): where enqueue_many's jobs without a run_at are due, plus their delay.
SELECT coalesce(%(now)s::timestamptz, now());
