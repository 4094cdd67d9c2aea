-- job_revivable_count: For the failed jobs a retry selects (ids), how many jobs outside them it would revive at most (the bulk retry's dry run): the dependants their failures ended (policy fail or cancel, a last_error naming a parent's failure), transitively, as migration 0019's trigger finds them; an upper bound, since one with another parent still failed stays failed.
WITH RECURSIVE ended (id) AS (
  SELECT d.child_id
  FROM pgkick.job_dependencies d JOIN pgkick.jobs c ON c.id = d.child_id
  WHERE d.parent_id = ANY(%(ids)s::bigint[]) AND d.policy <> 'run anyway'
    AND c.status = 'failed' AND c.last_error ~ '^(cancelled: )?parent job [0-9]+ failed: '
  UNION
  SELECT d.child_id
  FROM ended e
  JOIN pgkick.job_dependencies d ON d.parent_id = e.id
  JOIN pgkick.jobs c ON c.id = d.child_id
  WHERE d.policy <> 'run anyway'
    AND c.status = 'failed' AND c.last_error ~ '^(cancelled: )?parent job [0-9]+ failed: '
)
SELECT count(*)::int FROM ended WHERE id <> ALL(%(ids)s::bigint[]);
