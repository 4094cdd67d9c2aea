-- job_truncate_all: Empties the jobs table between benchmark items (benchmarks only: never on a real queue).
TRUNCATE pgkick.jobs;
