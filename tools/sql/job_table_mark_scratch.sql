-- job_table_mark_scratch: Marks the jobs table as pgkick bench's and demo's own, so that they may empty it and use it again (never an app's queue).
COMMENT ON TABLE pgkick.jobs IS 'pgkick scratch: made for pgkick bench and demo, which may empty it';
