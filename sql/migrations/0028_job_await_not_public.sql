-- 0028_job_await_not_public: job_await (SECURITY DEFINER since 0017) may be called by its owner and the roles that may insert jobs (they link what they enqueue to its parents, after=), not by PUBLIC, on every install: only `pgkick migrate --roles` (role_setup) took PUBLIC's right away before.
-- Why (the roles' review of 2026-12-05): PostgreSQL lets PUBLIC execute a new function, and
-- 0017 left job_await so. Where --roles never ran, any role that may use the schema (one
-- granted USAGE for reports, say) could call it with its owner's rights: flag any job as a
-- parent (its row written and locked until the caller's transaction ends) and learn from
-- the answer whether that job exists, finished or failed, though it may insert no job to
-- link. job_insert_flow's PUBLIC right was taken away by 0015 itself; the claim's and the
-- completions' functions run with their caller's rights (a caller without the tables'
-- rights gets nothing from them); trigger functions cannot be called directly.
REVOKE ALL ON FUNCTION job_await(bigint[], bigint[], text[], timestamptz) FROM PUBLIC;

-- Every role that may insert a job's payload (role_setup's pgkick_producer and pgkick_worker,
-- or an install's own roles) keeps calling it.
DO $grant$
DECLARE
  role_name text;
BEGIN
  FOR role_name IN
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_attribute AS c, LATERAL aclexplode(c.attacl) AS a
    WHERE c.attrelid = 'jobs'::regclass AND c.attname = 'payload' AND a.privilege_type = 'INSERT'
    UNION
    SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
    FROM pg_catalog.pg_class AS t, LATERAL aclexplode(t.relacl) AS a
    WHERE t.oid = 'jobs'::regclass AND a.privilege_type = 'INSERT' AND a.grantee <> t.relowner
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION job_await(bigint[], bigint[], text[], timestamptz)'
                   ' TO %s', role_name);
  END LOOP;
END
$grant$;
