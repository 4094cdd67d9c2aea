-- job_truncate_all: Empties the jobs table (and the dependencies that reference it, migration 0017) between benchmark items (benchmarks only: never on a real queue).
TRUNCATE pgkick.job_dependencies, pgkick.jobs;
