-- job_continue: Puts a running job whose invocation ran short of time for its next step back in the queue, due now, without using an attempt (a continuation: its finished steps stay stored), counting it and, when it continued before any step ran (stalled), the time the invocation had left (migration 0037: the larger one kept while it stalls again, the stall guard's measure of a claim as late as that) (fenced: only while this attempt holds it); or, when a cancel was requested since the worker's last heartbeat, fails it 'cancelled by operator'. Returns its status.
UPDATE pgkick.jobs
SET status            = CASE WHEN cancel_requested_at IS NULL THEN 'queued' ELSE 'failed' END,
    attempts          = CASE WHEN cancel_requested_at IS NULL THEN attempts - 1 ELSE attempts END,
    run_at            = CASE WHEN cancel_requested_at IS NULL
                             THEN coalesce(%(now)s::timestamptz, now()) ELSE run_at END,
    finished_at       = CASE WHEN cancel_requested_at IS NULL THEN finished_at
                             ELSE coalesce(%(now)s::timestamptz, now()) END,
    last_error        = CASE WHEN cancel_requested_at IS NULL THEN last_error
                             ELSE 'cancelled by operator' END,
    continued         = continued + 1,
    continued_stalled = %(stalled)s::boolean,
    continued_left_ms = CASE WHEN %(stalled)s::boolean  -- (greatest() skips a NULL)
                             THEN greatest(CASE WHEN continued_stalled THEN continued_left_ms END,
                                           %(left_ms)s::int)
                        END,
    locked_until      = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s
RETURNING status;
