-- job_step_stall_clear: Clears a job's stall mark (its last continuation came before any step ran) once the step that mark let run whatever its estimate is stored, so only that one step ignores the estimate: a later run claimed late (after a sleep, a snooze, a retry) continues again instead of overrunning its invocation (fenced: only while this attempt holds the job; written only when the mark is set).
UPDATE pgkick.jobs
SET continued_stalled = false
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s AND continued_stalled;
