-- periodic_tick_enqueue: Records one periodic task's scheduled tick and inserts its job, in one statement; a tick already recorded (the scheduler delivered it again) inserts nothing.
WITH tick AS (
  INSERT INTO pgkick.periodic_ticks (name, tick_at)
  VALUES (%(name)s, %(tick_at)s)
  ON CONFLICT DO NOTHING
  RETURNING name
)
INSERT INTO pgkick.jobs (queue, task, payload, max_attempts)
SELECT %(queue)s, %(task)s, %(payload)s::jsonb, %(max_attempts)s
FROM tick
RETURNING id, queue, run_at;
