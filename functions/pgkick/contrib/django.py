"""Enqueue on Django's connection inside `transaction.atomic()`; kick on its commit.

    from django.db import transaction
    from pgkick.contrib import django as pgkick_django

    with transaction.atomic():
        order = Order.objects.create(...)
        send_receipt.enqueue(pgkick_django.jobs(), {"order": order.id})
    # committed: kicked now (transaction.on_commit); rolled back: nothing is kicked

Why `on_commit`: it runs only once the outermost atomic block has committed, and
Django drops the hooks of a savepoint that rolled back. The jobs ride in the same
transaction as the app's rows, so a job exists exactly when its order does.
Needs Django's psycopg 3 backend (ENGINE django.db.backends.postgresql with psycopg
installed), because the rows are inserted on Django's own psycopg connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Unpack

from django.db import connections, transaction

from pgkick.connections.db import is_connection
from pgkick.errors import InvalidArgumentType, MisuseError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker
from pgkick.producer.joined import PendingJobs
from pgkick.validation import EnqueueOptions


class DjangoJobs:
    """Where jobs go inside an atomic block of the database alias `using`."""

    def __init__(self, using: str | None = None, *, kicker: Kicker | None = None) -> None:
        self.using = using or "default"
        self.kicker = kicker or default_kicker()  # a bad setting fails here, before any write

    def enqueue(self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]) -> int:
        """Insert one job in the current atomic block; it is kicked once the block commits."""
        pending = self._pending()
        job_id = pending.enqueue(payload, task=task, **options)
        transaction.on_commit(pending.kick, using=self.using)
        return job_id

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Insert many jobs in the current atomic block (one hook, one kick per queue)."""
        pending = self._pending()
        ids = pending.enqueue_many(jobs)
        transaction.on_commit(pending.kick, using=self.using)
        return ids

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """The calls inside written together or not at all, in the current atomic block
        (a workflow's levels: PendingJobs.savepoint)."""
        with self._pending().savepoint():
            yield

    def _pending(self) -> PendingJobs:
        connection = connections[self.using]
        if not connection.in_atomic_block:
            raise MisuseError(
                "pgkick.contrib.django: enqueue inside transaction.atomic() (the job then "
                "commits with the app's rows); outside one, use pgkick.enqueue_and_kick"
            )
        if not connection.commit_on_exit:  # the outermost atomic() found autocommit off
            raise MisuseError(
                f"pgkick.contrib.django: the connection {self.using!r} is not in autocommit "
                "(AUTOCOMMIT False, or transaction.set_autocommit(False)), so Django never "
                "runs on_commit hooks and the job would commit unkicked; nothing was "
                "written. Keep autocommit on, or enqueue with pgkick.enqueue_in(conn) and "
                "kick after your own commit"
            )
        if connection.vendor != "postgresql":  # "pip install psycopg" would not help here
            raise InvalidArgumentType(
                f"pgkick.contrib.django: the database {self.using!r} is {connection.vendor} "
                f"(ENGINE {connection.settings_dict.get('ENGINE')}); pgkick's jobs live in "
                "PostgreSQL: pass using= an alias whose ENGINE is django.db.backends.postgresql"
            )
        connection.ensure_connection()
        raw = connection.connection
        if not is_connection(raw):
            raise InvalidArgumentType(
                "pgkick.contrib.django: needs Django's psycopg 3 backend (pip install "
                f"psycopg), got a {type(raw).__module__}.{type(raw).__name__} connection"
            )
        return PendingJobs(raw, kicker=self.kicker)


def jobs(using: str | None = None, *, kicker: Kicker | None = None) -> DjangoJobs:
    """The enqueue target for `task.enqueue(jobs(), payload)` inside `atomic()`."""
    return DjangoJobs(using, kicker=kicker)


def enqueue(payload: Any, *, task: str, using: str | None = None, **options: Any) -> int:
    """String-name form: `enqueue({"order": 42}, task="send_receipt")` inside `atomic()`."""
    return DjangoJobs(using).enqueue(payload, task=task, **options)
