-- session_reap_privileges_missing: The tables the session's role may not delete from that the reaper's purges do (the jobs, the periodic ticks: pgkick_maintainer may, pgkick_worker not), with the role's name; no row: it may reap.
SELECT current_user::text, quote_ident(%(schema)s) || '.' || t.name
FROM (VALUES ('jobs'), ('periodic_ticks')) AS t(name)
WHERE NOT has_table_privilege(quote_ident(%(schema)s) || '.' || t.name, 'DELETE')
ORDER BY t.name;
