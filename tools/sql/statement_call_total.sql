-- statement_call_total: Statements run in this database so far (pg_stat_statements), leaving out this count itself: the idle query rate.
SELECT coalesce(sum(calls), 0)::bigint AS calls
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '-- statement_call_total:%%';
