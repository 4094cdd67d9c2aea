-- job_truncate_all: Empties the jobs table between benchmark items, and with it the tables that reference jobs (dependencies, durable steps: CASCADE), benchmarks only: never on a real queue.
TRUNCATE pgkick.jobs CASCADE;
