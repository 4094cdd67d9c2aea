-- job_lease_latest_in_queue: The latest lease expiry among a queue's running jobs (a rescue that finds leases not yet expired comes back then).
SELECT max(locked_until) FROM pgkick.jobs WHERE queue = %(queue)s AND status = 'running';
