"""pgkick.contrib.django with real Django on the real PostgreSQL: kicked on commit only."""

from __future__ import annotations

from collections.abc import Iterator

import django
import pytest
from django.conf import settings
from django.db import connections, transaction
from psycopg.conninfo import conninfo_to_dict

from pgkick.contrib import django as pgkick_django
from pgkick.tasks.registry import Registry
from tests.test_producer import RecordingKicker, count_jobs

tasks = Registry()


@tasks.task("django_receipt")
def receipt(payload: dict[str, int]) -> None:
    pass


@pytest.fixture
def django_db(dsn: str) -> Iterator[str]:
    """Django configured in-process, its default database pointed at this test's."""
    params = conninfo_to_dict(dsn)
    database = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": params.get("dbname", ""),
        "USER": params.get("user", ""),
        "PASSWORD": params.get("password", ""),
        "HOST": params.get("host", ""),
        "PORT": params.get("port", ""),
    }
    if not settings.configured:
        settings.configure(DATABASES={"default": database}, USE_TZ=True)
        django.setup()
    connection = connections["default"]
    connection.close()
    connection.settings_dict.update(database)
    try:
        yield dsn
    finally:
        connection.close()


def _orders(cursor_sql: str = "CREATE TABLE orders (id int PRIMARY KEY)") -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute(cursor_sql)


def test_job_commits_with_the_atomic_block_and_is_kicked_on_commit(django_db: str) -> None:
    """Catches: a kick sent inside the atomic block (before the commit), the job inserted
    on another connection (committed even when the block rolls back), or a kick for a
    rolled-back block."""
    _orders()
    kicker = RecordingKicker()
    with transaction.atomic():
        with connections["default"].cursor() as cursor:
            cursor.execute("INSERT INTO orders VALUES (42)")
        job_id = receipt.enqueue(pgkick_django.jobs(kicker=kicker), {"order": 42})
        assert kicker.kicks == []  # not before the commit
        assert count_jobs(django_db) == 0  # and not visible to anyone else yet
    assert kicker.kicks == [("default", "enqueue")]
    assert count_jobs(django_db) == 1

    with pytest.raises(ZeroDivisionError):
        with transaction.atomic():
            receipt.enqueue(pgkick_django.jobs(kicker=kicker), {"order": 43})
            raise ZeroDivisionError
    assert kicker.kicks == [("default", "enqueue")]  # nothing for the rolled-back one
    assert count_jobs(django_db) == 1
    assert job_id > 0


def test_a_batch_first_in_its_atomic_block_rolls_back_with_it(django_db: str) -> None:
    """Catches a batch committed on its own as the block's first statement: atomic() turns
    autocommit off and sends nothing, so the connection has no transaction open yet, and
    enqueue_many's conn.transaction() made a BEGIN ... COMMIT of its own (the block's
    rollback left the jobs)."""
    kicker = RecordingKicker()
    with pytest.raises(ZeroDivisionError):
        with transaction.atomic():
            ids = pgkick_django.jobs(kicker=kicker).enqueue_many(
                [{"payload": {"n": n}, "task": "django_receipt"} for n in range(2)]
            )
            raise ZeroDivisionError
    assert len(ids) == 2
    assert kicker.kicks == []
    assert count_jobs(django_db) == 0


def test_outside_atomic_or_bad_payload_is_refused_before_writing(django_db: str) -> None:
    """Catches: an enqueue outside atomic() committing alone with nobody to kick it, or a
    bad payload reaching Django's connection."""
    kicker = RecordingKicker()
    with pytest.raises(RuntimeError, match=r"inside transaction.atomic\(\)"):
        pgkick_django.jobs(kicker=kicker).enqueue({}, task="django_receipt")
    with transaction.atomic():
        with pytest.raises(ValueError, match="NaN"):
            pgkick_django.jobs(kicker=kicker).enqueue({"x": float("nan")}, task="t")
    assert count_jobs(django_db) == 0
    assert kicker.kicks == []


def test_a_connection_not_in_autocommit_is_refused_before_writing(django_db: str) -> None:
    """With autocommit off (AUTOCOMMIT False, or set_autocommit(False)) Django's outermost
    atomic() runs no on_commit hooks. Catches (a review) the job committed by the app's
    own commit and never kicked, its hook left pending in Django for ever."""
    kicker = RecordingKicker()
    transaction.set_autocommit(False)
    try:
        with transaction.atomic():
            with pytest.raises(RuntimeError, match="not in autocommit"):
                pgkick_django.jobs(kicker=kicker).enqueue({}, task="django_receipt")
        transaction.commit()
    finally:
        transaction.set_autocommit(True)
    assert count_jobs(django_db) == 0 and kicker.kicks == []


def test_a_project_without_time_zones_is_kicked_on_commit(django_db: str) -> None:
    """USE_TZ=False: Django's connection loads timestamptz naive (and jsonb as text).
    Catches (a review) pgkick's statements on that connection taking Django's loaders: the
    jobs' due times came back naive, the kick after the commit failed comparing them with
    an aware now, and every job committed unkicked (a log line, then the next wake-up)."""
    from django.test import override_settings

    kicker = RecordingKicker()
    with override_settings(USE_TZ=False):
        connections["default"].close()  # the next connection takes the setting
        with transaction.atomic():
            receipt.enqueue(pgkick_django.jobs(kicker=kicker), {"order": 1})
            pgkick_django.jobs(kicker=kicker).enqueue_many(
                [{"payload": {"n": 2}, "task": "django_receipt", "queue": "q"}]
            )
        connections["default"].close()
    assert kicker.kicks == [("default", "enqueue"), ("q", "enqueue")]
    assert count_jobs(django_db) == 2


def test_a_database_that_is_not_postgresql_is_named_in_the_refusal(django_db: str) -> None:
    """Catches (a review) a SQLite database told to `pip install psycopg`: installing it
    changes nothing, the jobs live in PostgreSQL. The error names the alias's ENGINE."""
    lite = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    connections.settings["lite"] = connections.configure_settings({"default": lite})["default"]
    try:
        with transaction.atomic(using="lite"):
            with pytest.raises(TypeError, match=r"'lite' is sqlite .*PostgreSQL"):
                pgkick_django.jobs("lite", kicker=RecordingKicker()).enqueue({}, task="t")
    finally:
        connections["lite"].close()
        del connections["lite"]
        del connections.settings["lite"]
