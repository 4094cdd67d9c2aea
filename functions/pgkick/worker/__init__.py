"""The worker's side: the loop, leases, task runs, rescue, the reaper, the runtime root."""
