-- job_id_range: The lowest and highest job ids (two probes of the primary key), where a bounded page of `pgkick jobs` starts and whether older ids remain.
SELECT (SELECT min(id) FROM pgkick.jobs) AS low, (SELECT max(id) FROM pgkick.jobs) AS high;
