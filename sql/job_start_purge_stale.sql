-- job_start_purge_stale: Deletes the rate-limit starts no window can count any more: older than two of their queue's periods, or of a queue that has no rate now (a claim prunes only the keys it starts, so a key never claimed again would keep its starts for ever).
DELETE FROM pgkick.job_starts s
WHERE NOT EXISTS (
  SELECT 1 FROM pgkick.queue_limits l
  WHERE l.queue = s.queue AND l.rate_period IS NOT NULL
    AND s.started_at > coalesce(%(now)s::timestamptz, now()) - 2 * l.rate_period
);
