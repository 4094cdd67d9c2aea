-- job_await: Links jobs just inserted (still queued, in this transaction) to their parents, as pairs (child, parent, policy): the server-side job_await of migration 0017, which flags and locks the parents, ends at once a child whose parent already failed, and returns the children left waiting.
SELECT id
FROM pgkick.job_await(%(children)s::bigint[], %(parents)s::bigint[], %(policies)s::text[],
                      %(now)s::timestamptz);
