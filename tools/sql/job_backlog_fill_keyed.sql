-- job_backlog_fill_keyed: Fills a queue with count ready jobs, due a millisecond apart in the past, spread over keys tenants (job n: group k<n mod keys> and the same rate key), for the claim with a rate per key and a concurrency per key (migration 0014).
INSERT INTO pgkick.jobs (queue, task, payload, run_at, group_key, rate_key)
SELECT 'default', 'noop', '{}', now() - interval '1 day' + n * interval '1 millisecond',
       'k' || (n %% %(keys)s::int), 'k' || (n %% %(keys)s::int)
FROM generate_series(1, %(count)s::int) AS n;
