-- job_id_reserve: Reserves n ids from the jobs' identity sequence in one statement, in ascending order (the children a running task spawns, inserted with these ids in its completion's transaction; a sequence is not transactional: an id never used is a harmless gap).
SELECT nextval(s.seq)
FROM (SELECT pg_get_serial_sequence(quote_ident(%(schema)s) || '.jobs', 'id')::regclass AS seq) s,
     generate_series(1, %(n)s::int) AS g(n)
ORDER BY g.n;
