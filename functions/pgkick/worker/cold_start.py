"""The worker's first connection, started by its handler before the rest of it is imported.

Why a module of its own: it must load little (settings, the connection, the schema check)
so that the thread starts early and the worker's other modules, Powertools and the app's
task modules are imported while it waits on the network (pgkick.connections.early says
when it is safe). The invocation takes the connection through
`pgkick.worker.runtime.Runtime`, exactly where it would have opened one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pgkick import config
from pgkick.connections.db import Connection, Database, connect
from pgkick.connections.early import EarlyConnection
from pgkick.errors import ConfigError
from pgkick.store import migrations as schema
from pgkick.store import queries


def connect_ahead(env: Mapping[str, str] | None = None) -> EarlyConnection | None:
    """On an on-demand cold start, a connection (schema checked) being opened in a thread
    with the worker's own settings (`env`: os.environ unless given); else None, and the
    invocation connects as before.

    Settings that do not parse start nothing: `Runtime.from_env` raises the same error a
    moment later, where it always did."""
    if not config.on_demand_init(env):
        return None
    try:
        settings = config.Settings.from_env(env)
        app = config.app_settings() if env is None else config.AppSettings.from_env(env)
        if app.database_url is None:
            from pgkick.awsapi import secrets  # noqa: F401 - imported here, not in the thread
    except ConfigError:
        return None

    def open_checked() -> Connection:
        conn = connect(app.dsn(), retries=settings.connect_retries)
        try:
            db = Database(conn, schema=settings.schema)
            schema.check(db)
            plan_the_claim(db)
        except BaseException:
            conn.close()
            raise
        return conn

    return EarlyConnection(open_checked)


def plan_the_claim(db: Database) -> None:
    """Have the new session compile the claim before the invocation needs it.

    PL/pgSQL compiles job_claim and plans its statements at their first run in a session:
    a new session's first claim took 3.9 ms here, the next 0.45 ms, and the first is the
    one a cold start waits for. A claim of a queue no job can be in (a queue's name is
    never empty) with a batch of 0 runs its plain path and claims, locks and writes
    nothing; the worker's own claim then finds it planned. The round robin of a queue with
    a rate or a concurrency is a second function with a larger plan (a session's first
    claim of such a queue took 5.6 ms here, the next 0.8 ms): it is compiled the same way,
    in the same round trip, when any queue has such a limit (job_claim_fair_plan); that
    first claim then takes 3.0 ms (the rest is the writes of a claim that takes jobs).
    (Behind a transaction-mode pooler these may run on another server session, which then
    plans the claim as before.)"""
    with db.pipeline():
        db.execute(queries.JOB_CLAIM, queue="", batch=0, lease=timedelta(0), timed=False)
        db.execute(queries.JOB_CLAIM_FAIR_PLAN)
