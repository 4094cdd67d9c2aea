"""A cold start's first connection, opened in a thread while the cold start still imports.

Why: a cold worker did its waiting after its imports, one wait after another: the DSN (on
AWS a GetSecretValue), the connection (TCP, TLS, SCRAM, and a suspended serverless
compute resuming) and the schema check, each on the network while the CPU sat idle.
Started before the rest of the handler's imports (pgkick's modules, Powertools, the
app's task modules), they overlap them.

Only for Lambda's on-demand initialisation (`pgkick.config.on_demand_init`: Lambda and
`pgkick dev` set AWS_LAMBDA_INITIALIZATION_TYPE=on-demand): an invocation follows that
init at once, and takes the connection or closes it before it answers, so no session
outlives it. A provisioned or SnapStart environment initialises long before its first
invocation: a connection opened then would hold a session (and keep a database awake)
for nothing, or come back from a snapshot dead.

What the thread met (a refused password, a schema this code does not know: pgkick's own
errors) is raised by the invocation that takes the connection, where the same error is
raised when it connects itself; anything else the thread met leaves the invocation to
connect as it would have without it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pgkick.connections.db import Connection
from pgkick.errors import PgkickError


class EarlyConnection:
    """One connection being opened (and checked) by a daemon thread, for one taker."""

    def __init__(self, open_checked: Callable[[], Connection]) -> None:
        self._conn: Connection | None = None
        self._error: PgkickError | None = None
        self._thread = threading.Thread(
            target=self._open, args=(open_checked,), name="pgkick-early-connection", daemon=True
        )
        self._thread.start()

    def _open(self, open_checked: Callable[[], Connection]) -> None:
        try:
            self._conn = open_checked()
        except PgkickError as exc:  # an answer (refused, wrong schema): the invocation's to raise
            self._error = exc
        except Exception:  # anything else (an import race, a driver's surprise): the invocation
            pass  # connects itself, as without this thread, and meets it again if it is real

    def wait(self) -> None:
        """Until the thread has connected (and checked) or failed: bounded by the connect
        timeout and retries it was given."""
        self._thread.join()

    def take(self) -> Connection | None:
        """The connection, now the caller's to close, or the error met opening it, raised;
        None once taken or closed."""
        self.wait()
        conn, error = self._conn, self._error
        self._conn = self._error = None
        if error is not None:
            raise error
        return conn

    def close(self) -> None:
        """Close the connection unless it was taken (an invocation that connected nothing:
        a rejected event), and forget any error: the environment lives on without it."""
        self.wait()
        conn, self._conn, self._error = self._conn, None, None
        if conn is not None:
            conn.close()
