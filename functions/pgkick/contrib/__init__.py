"""Enqueue inside a framework's own transaction, kick on its commit.

`pgkick.contrib.django` and `pgkick.contrib.sqlalchemy` (extras `pgkick[django]`,
`pgkick[sqlalchemy]`); both need the psycopg 3 driver, since the jobs are inserted
on the framework's own connection (see `pgkick.producer.joined`).
"""
