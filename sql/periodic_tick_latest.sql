-- periodic_tick_latest: Each periodic declaration's latest tick enqueued (the ticks table is purged after days: small), for the dashboard's recurring schedules.
SELECT name, max(tick_at) AS last_tick
FROM pgkick.periodic_ticks
GROUP BY name
ORDER BY name;
