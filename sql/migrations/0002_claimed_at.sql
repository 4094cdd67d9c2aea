-- 0002_claimed_at: when the current attempt was claimed, for kick-to-start latency and "running since".
ALTER TABLE jobs ADD COLUMN claimed_at timestamptz;
