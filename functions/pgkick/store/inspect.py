"""Reading jobs for people: the statements behind `pgkick jobs`, `pgkick job` and the dashboard.

Why a class of its own: it only reads (every statement here is a SELECT), so the
dashboard can run read-only against any database with it, and the CLI and the
dashboard show the same rows from the same statements.

Why pages are bounded: a page is keyset-paged on the primary key (newest first,
`id < after`), never counted. A filter with an index of its own (failed jobs alone and
running jobs: partial indexes; a unique key: its index) reads only matching rows. Any
other filter (a task, a queue, a group, queued or done, failed with another) is checked
row by row along the primary key, so a page looks at no more than `SCAN_WINDOW` ids:
when fewer rows match there, the page says where the next look starts (`next_after`),
and costs the same at a million jobs as at a thousand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any, Self

from pgkick.connections.db import Database
from pgkick.errors import InvalidArgument
from pgkick.store import queries

STATUSES = ("waiting", "queued", "running", "done", "failed")  # waiting: migration 0017
SCAN_WINDOW = 20_000  # ids a filtered page may look at, at most (a few ms at 1M jobs)
MAX_LIMIT = 500
# Filters that read an index of their own (migration 0009, 0004): no window needed.
_INDEXED_STATUSES = ("failed", "running")
_TEXT_FILTERS = ("task", "queue", "unique_key", "group", "error")  # and status, checked first


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs to list; None everywhere: all of them.

    Why the one definition: `pgkick jobs`, the dashboard and the bulk retry, cancel and
    purge (pgkick.cli.bulk.JobSelection, a subclass) select with these fields, these
    checks and these parameters, so what a listing shows is what a bulk action takes."""

    status: str | None = None
    task: str | None = None
    queue: str | None = None
    unique_key: str | None = None
    group: str | None = None
    # Created at or after `since`, before `until`; `error`: text the last error contains
    # (any case for ASCII letters; others as the database's LC_CTYPE folds them: lower()).
    # The CLI's (`pgkick jobs --since/--until/--error`) and a bulk action's.
    since: datetime | None = None
    until: datetime | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        self.check_status()
        for name in ("status", *_TEXT_FILTERS):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidArgument(f"{name}: a non-empty string, or None for no filter")
            if value is not None and "\x00" in value:  # else psycopg's error, as a 503
                raise InvalidArgument(
                    f"{name}: {value!r} holds a NUL character, which no job's text can hold"
                )
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
                raise InvalidArgument(f"{name}: a timezone-aware datetime, or None")
        if self.since and self.until and self.since >= self.until:
            raise InvalidArgument(f"since {self.since} is not before until {self.until}")

    def check_status(self) -> None:
        """A listing takes any status there is; a bulk selection overrides this and checks
        the status against its action's (pgkick.cli.bulk), once the action is known."""
        if self.status is not None and self.status not in STATUSES:
            raise InvalidArgument(
                f"unknown status {self.status!r}: use one of {', '.join(STATUSES)}"
            )

    @classmethod
    def of(cls, **values: Any) -> Self:
        """A filter from form or command-line values (an empty string is no filter)."""
        return cls(**{name: value or None for name, value in values.items()})

    @property
    def empty(self) -> bool:
        """No filter set: every job."""
        return all(getattr(self, name) is None for name in FILTERS)

    @property
    def indexed(self) -> bool:
        """True when an index finds the matching rows, newest first, without a window.

        Why failed only alone: jobs_failed_idx holds every failed job, and with another
        filter (a task, an error text) it returns those that do not match too, all of them
        when few match (a page read 48,333 failed jobs in a review). Running jobs are few
        (as many as run at once), so their index bounds a page whatever else is asked."""
        if self.unique_key is not None or self.status == "running":
            return True
        if self.status in _INDEXED_STATUSES:
            return all(getattr(self, name) is None for name in FILTERS if name != "status")
        return self.empty  # no filter: every id along the primary key matches

    def as_params(self) -> dict[str, Any]:
        values = asdict(self)
        values["group_key"] = values.pop("group")
        return values

    def as_query(self) -> dict[str, str]:
        """The filters that are set, by name (for links)."""
        return {
            name: value.isoformat() if isinstance(value, datetime) else value
            for name, value in asdict(self).items()
            if value is not None
        }


# Each filter's name, as a field of JobFilter and a `pgkick jobs` option (--unique-key: _ to -).
FILTERS = tuple(field.name for field in fields(JobFilter))


@dataclass(frozen=True, slots=True)
class JobPage:
    """Up to `limit` jobs, newest first; `next_after`: the cursor of the next page, if any;
    `looked_down_to`: the lowest id a bounded page looked at (None: it was not bounded)."""

    jobs: list[dict[str, Any]]
    next_after: int | None
    looked_down_to: int | None


MAX_ID = 2**63 - 1  # jobs.id is a bigint


def parse_id(text: str) -> int:
    """A job id from what a person typed, refused here (InvalidArgument) unless it is a
    bigint of 1 or more: a larger one reached PostgreSQL and came back as its "bigint out
    of range", which the dashboard took for a database failure (503). ASCII digits only:
    int() reads any Unicode digit, and the dashboard opened /jobs/\uff11 (a full-width 1)
    as job 1."""
    if not (text.isascii() and text.isdigit()):
        raise InvalidArgument(f"job id must be a whole number, not {text!r}")
    value = int(text)
    if value < 1:
        raise InvalidArgument(f"job id must be 1 or more, not {value}")
    if value > MAX_ID:
        raise InvalidArgument(f"job id must be at most {MAX_ID} (a bigint), not {value}")
    return value


class JobReader(Database):
    """Read-only statements over one connection: pages of jobs, one job, the queues."""

    def page(self, filters: JobFilter, *, after: int | None = None, limit: int = 50) -> JobPage:
        params = self.page_params(filters, after=after, limit=limit)
        if params is None:  # no jobs at all
            return JobPage([], None, None)
        low = params.pop("_low")
        floor = params["floor"]
        rows = self.dicts(queries.JOB_LIST_PAGE, **params)
        if len(rows) > limit:
            return JobPage(rows[:limit], rows[limit - 1]["id"], floor)
        if floor is not None and floor > low:
            return JobPage(rows, floor, floor)  # older ids remain below this window
        return JobPage(rows, None, floor)

    def page_params(
        self, filters: JobFilter, *, after: int | None, limit: int
    ) -> dict[str, Any] | None:
        """job_list_page's parameters for this page (one more row than `limit`: whether
        another page follows); None when there are no jobs. `_low` is not one of them."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
        floor = low = None
        if not filters.indexed:
            low, high = self.one(queries.JOB_ID_RANGE)
            if low is None:
                return None
            top = high + 1 if after is None else min(after, high + 1)
            floor = max(top - SCAN_WINDOW, low)
        params = {"after": after, "floor": floor, "limit": limit + 1, **filters.as_params()}
        return params | {"_low": low}

    def job(self, job_id: int) -> dict[str, Any] | None:
        """One job, with its durable steps (`steps`: the first 100, results cut to 200
        characters of JSON), so the shell and the dashboard show where a task stands."""
        rows = self.dicts(queries.JOB_GET, id=job_id)
        if not rows:
            return None
        job = rows[0]
        job["steps"] = self.dicts(queries.JOB_STEP_LIST_SHOWN, id=job_id)
        return job

    def queues(self) -> list[dict[str, Any]]:
        """Every queue with live or failed jobs or a limit (see sql/queue_overview.sql)."""
        return self.dicts(queries.QUEUE_OVERVIEW)

    def latest_ticks(self) -> dict[str, Any]:
        """Each periodic declaration's latest tick enqueued, by name."""
        return {name: tick for name, tick in self.rows(queries.PERIODIC_TICK_LATEST)}
