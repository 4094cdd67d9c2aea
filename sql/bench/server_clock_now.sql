-- server_clock_now: The server's clock now, to time a run on the clock its finished_at stamps use.
SELECT clock_timestamp() AS now;
