-- role_setup_done: Whether pgkick's three roles exist here, set up by an earlier `pgkick migrate --roles` (a later migrate then grants them what its new migrations need).
SELECT count(*) = 3
FROM pg_catalog.pg_roles
WHERE rolname IN ('pgkick_producer', 'pgkick_worker', 'pgkick_maintainer');
