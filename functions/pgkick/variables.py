"""Every environment variable pgkick reads: its name, default, bounds and what it does.

Why a table apart from pgkick.config: the settings read their defaults and bounds
from it, and the documentation's configuration reference is rendered from it at
build time (docs/hooks/reference.py), so the page and the code cannot drift;
tests/test_docs.py checks that every name the runtime mentions is here.
"""

from collections.abc import Mapping
from typing import NamedTuple

from pgkick.errors import ConfigError

KICKERS = ("lambda", "local", "none")
LISTEN_MODES = ("auto", "on", "off")  # PGKICK_WORKER_LISTEN (pgkick.worker.linger)
# The worker loop's defaults, here once: pgkick.config.Settings reads them from the
# environment, pgkick.worker.loop.WorkerOptions defaults to them.
DEFAULT_BATCH = 10
DEFAULT_LEASE_SECONDS = 300
DEFAULT_MIN_REMAINING_MS = 2000
DEFAULT_MAX_FANOUT = 1
DEFAULT_WATCH_SECONDS = 5
DEFAULT_MAX_HOPS = 12
DEFAULT_SCHEMA = "pgkick"


class Variable(NamedTuple):
    """One environment variable pgkick reads. An empty value counts as unset.

    `default` is the value when unset (None: no default); a variable with bounds is a
    whole number in `low..high`, in `unit` ("" for a count)."""

    name: str
    default: int | str | None
    description: str
    low: int | None = None
    high: int | None = None
    unit: str = ""
    choices: tuple[str, ...] = ()


def _n(name: str, default: int, low: int, high: int, unit: str, description: str) -> Variable:
    return Variable(name, default, description, low, high, unit)


# One entry a variable: name, default (bounds, unit), then what it does. Laid out by hand.
# fmt: off
VARIABLES: tuple[Variable, ...] = (
    Variable("DATABASE_URL", None,
             "The PostgreSQL DSN (app, worker, reaper; the CLI's `--dsn` default). "
             "Empty in Lambda, where the secret below is read instead."),
    Variable("PGKICK_TEST_DATABASE_URL", None,
             "The server pgkick's pytest plugin makes its test databases on (the role needs "
             "`CREATEDB`); else `DATABASE_URL`'s, else the embedded PostgreSQL of pgkick-dev."),
    Variable("PGKICK_DATABASE_SECRET_ARN", None,
             "Secrets Manager secret holding the DSN, read when `DATABASE_URL` is empty: a "
             "`postgresql://` URL, `{\"url\": ...}` or the RDS shape. Cached 5 minutes, never "
             "logged."),
    Variable("PGKICK_KICKER", None,
             "How a kick is delivered. Default `lambda` when `PGKICK_WORKER_FUNCTION` is set; "
             "unset, enqueueing raises `ConfigError` before writing. `local` needs pgkick-dev.",
             choices=KICKERS),
    Variable("PGKICK_WORKER_FUNCTION", None,
             "The worker Lambda's name or ARN, which the `lambda` kicker invokes (the stack "
             "names it `<stack>-worker`)."),
    Variable("PGKICK_WORKER_ARN", None,
             "The worker's ARN, target of wake-ups, rescues and periodic schedules. Default: "
             "`PGKICK_WORKER_FUNCTION` when that is an ARN."),
    Variable("PGKICK_SCHEDULER_ROLE_ARN", None,
             "The role EventBridge Scheduler assumes to invoke the worker. Without it (or a "
             "worker ARN) no wake-up is booked and the reaper is the fallback."),
    Variable("PGKICK_SCHEDULE_GROUP", "default",
             "The Scheduler group of wake-ups, rescues and periodic schedules."),
    Variable("PGKICK_SCHEDULE_DLQ_ARN", None,
             "The SQS queue a wake-up, rescue or periodic tick goes to when Scheduler "
             "cannot deliver it (its DeadLetterConfig; the template sets FailedKicksQueue, "
             "which the worker drains; give `pgkick schedules sync` its "
             "`FailedKicksQueueArn` output). Unset: no dead-letter queue."),
    Variable("PGKICK_TASKS", "",
             "Comma-separated modules the worker imports to register its tasks, e.g. "
             "`orders_app.tasks,orders_app.reports` (blanks around names ignored). Empty: "
             "the built-in `noop` only."),
    Variable("PGKICK_SCHEMA", DEFAULT_SCHEMA,
             "The schema of pgkick's tables: a lowercase identifier (`a-z`, `0-9`, `_`; at most "
             "63 characters; not `pg_*`). Set it everywhere: app, worker, reaper, CLI."),
    _n("PGKICK_BATCH", DEFAULT_BATCH, 1, 1000, "jobs",
       "Jobs a worker claims at once."),
    _n("PGKICK_LEASE_SECONDS", DEFAULT_LEASE_SECONDS, 1, 86_400, "s",
       "A claimed job's lease: the longer of this and the invocation's remaining time plus "
       "`PGKICK_LEASE_MARGIN_SECONDS`."),
    _n("PGKICK_LEASE_MARGIN_SECONDS", 30, 0, 3600, "s",
       "How long a lease outlasts the invocation, so a rescue never overlaps a live worker "
       "(the template sets 60)."),
    _n("PGKICK_MIN_REMAINING_MS", DEFAULT_MIN_REMAINING_MS, 0, 900_000, "ms",
       "A worker stops claiming when the Lambda time left is below its longest batch plus "
       "this, then hands over; below this alone, no job of its claim starts: it goes back "
       "to the queue, its attempt not used."),
    _n("PGKICK_MAX_FANOUT", DEFAULT_MAX_FANOUT, 0, 100, "kicks",
       "Extra workers a worker kicks once full batches kept coming (0: it never fans out)."),
    _n("PGKICK_FANOUT_AFTER_MS", 1000, 0, 900_000, "ms",
       "How long full batches must keep coming before a worker fans out (about a cold "
       "start)."),
    _n("PGKICK_BACKOFF_MS", 10_000, 1, 3_600_000, "ms",
       "A retry waits this x 2^attempts, at most `PGKICK_BACKOFF_CAP_SECONDS`, times a jitter "
       "of 0.9..1.1."),
    _n("PGKICK_BACKOFF_CAP_SECONDS", 3600, 1, 86_400, "s",
       "The longest retry backoff."),
    _n("PGKICK_RETENTION_DAYS", 7, 0, 36_500, "days",
       "The reaper purges done and failed jobs (and periodic ticks) older than this; "
       "a periodic tick is kept at least 15 days and 6 hours whatever this says (as long "
       "as it can be delivered again), a unique key's newest job 30 days (the longest "
       "throttle)."),
    _n("PGKICK_LOCAL_CONCURRENCY", 4, 1, 256, "environments",
       "The local kicker's execution environments at once (`PGKICK_KICKER=local`); more "
       "events wait, as throttles."),
    _n("PGKICK_CONNECT_RETRIES", 3, 0, 10, "retries",
       "Connection attempts retried with backoff (a resuming serverless compute can refuse "
       "the first ones)."),
    _n("PGKICK_WORKER_LINGER_MS", 1000, 0, 60_000, "ms",
       "How long a worker whose claim came back empty keeps re-claiming before it withdraws "
       "(0: it leaves at once)."),
    Variable("PGKICK_WORKER_LISTEN", "auto",
             "Whether a lingering worker LISTENs for the producers' NOTIFY and claims a new job "
             "within milliseconds instead of at its next pause. `auto`: unless a pooler stands "
             "between it and the server (where LISTEN cannot work: pauses only); `on`: even "
             "then (a session-mode pooler); `off`: pauses only.",
             choices=LISTEN_MODES),
    _n("PGKICK_WATCH_SECONDS", DEFAULT_WATCH_SECONDS, 1, 3600, "s",
       "How long a worker's announcement on its queue is valid: the latest it promises to "
       "claim again."),
    _n("PGKICK_MAX_HOPS", DEFAULT_MAX_HOPS, 1, 15, "hops",
       "Self-invocations in a worker chain before it hands over by a wake-up (Lambda stops "
       "loops after about 16)."),
    _n("PGKICK_AWS_TIMEOUT_MS", 2000, 100, 60_000, "ms",
       "Connect and read timeout of each AWS call attempt (2 attempts), so an endpoint that "
       "never answers holds no caller."),
    _n("PGKICK_PRODUCER_LINGER_MS", 1000, 0, 60_000, "ms",
       "How long a producer's connection stays open after its last enqueue, for the next "
       "call (0: a connection per call)."),
    _n("PGKICK_FAILED_KICK_WAKE_MS", 0, 0, 3_600_000, "ms",
       "After a failed kick, its wake-up is booked this far out (0: the scheduler's first "
       "minute at least 5 s ahead, which it fires within)."),
    _n("PGKICK_KICK_SAFETY_MS", 60_000, 0, 3_600_000, "ms",
       "After each kick and wake-up, a safety wake-up of its queue is booked this far out "
       "(the scheduler's minute, once per queue and minute): a kick Lambda drops silently "
       "still runs its jobs (0: none)."),
    _n("PGKICK_KICK_PENDING_MS", 10_000, 100, 3_600_000, "ms",
       "How long a reserved kick counts as a worker on its way, so racing producers send "
       "one kick."),
    Variable("POWERTOOLS_SERVICE_NAME", "pgkick-worker, pgkick-reaper",
             "The Lambda handlers' logger service (the template sets `<stack>-worker`, "
             "`<stack>-reaper`)."),
    Variable("POWERTOOLS_METRICS_NAMESPACE", "pgkick",
             "The Lambda handlers' metrics namespace."),
    # AWS's own, set by Lambda: read by pgkick.awsapi, where boto3 would read them (the
    # initialization type by pgkick.config, for the worker's cold start).
    Variable("AWS_LAMBDA_FUNCTION_NAME", None,
             "Set by Lambda (and in the local stack's environments). With the credentials "
             "and region below, pgkick signs its own Lambda (kicks), Scheduler and Secrets "
             "Manager calls instead of importing boto3; unset (an app, the CLI), boto3 makes "
             "them."),
    Variable("AWS_LAMBDA_INITIALIZATION_TYPE", None,
             "Set by Lambda (and in the local stack's environments): `on-demand` makes the "
             "worker's cold start open its connection while its handler imports; "
             "`provisioned-concurrency`, `snap-start` or unset, its first invocation does."),
    Variable("AWS_REGION", None,
             "Set by Lambda: the region of those calls (else `AWS_DEFAULT_REGION`)."),
    Variable("AWS_DEFAULT_REGION", None,
             "The region of those calls when `AWS_REGION` is unset, as boto3 reads it."),
    Variable("AWS_ACCESS_KEY_ID", None,
             "Set by Lambda for the function's role: the key those calls are signed with "
             "(none in the environment, as under SnapStart: boto3 makes them)."),
    Variable("AWS_SECRET_ACCESS_KEY", None,
             "Set by Lambda: the secret key those calls are signed with."),
    Variable("AWS_SESSION_TOKEN", None,
             "Set by Lambda: the session token sent with those calls."),
    Variable("AWS_ENDPOINT_URL", None,
             "As boto3: an endpoint for every AWS service, after the service's own "
             "(`AWS_ENDPOINT_URL_LAMBDA`, `_SCHEDULER`, `_SECRETS_MANAGER`); `pgkick dev` "
             "points its environments at itself with them."),
    Variable("AWS_CA_BUNDLE", None,
             "As boto3: the certificates those calls trust instead of the system's."),
)
# fmt: on

BY_NAME = {variable.name: variable for variable in VARIABLES}


# A variable's value, from an environment mapping given by pgkick.config (the one reader of
# os.environ), checked against its row: a bad value is refused naming the variable.
def whole_number(env: Mapping[str, str], name: str) -> int:
    """The whole number `name` holds, with its default and bounds from VARIABLES."""
    variable = BY_NAME[name]
    assert isinstance(variable.default, int) and variable.low is not None
    assert variable.high is not None  # every bounded variable has both bounds
    return bounded_int(env, name, variable.default, variable.low, variable.high)


def choice(env: Mapping[str, str], name: str) -> str:
    """A variable that holds one of its listed choices (its default when unset)."""
    variable = BY_NAME[name]
    value = env.get(name) or default_text(name)
    if value not in variable.choices:
        raise ConfigError(f"{name}={value!r}: expected one of {', '.join(variable.choices)}")
    return value


def default_text(name: str) -> str:
    """The default of a text variable, from VARIABLES."""
    default = BY_NAME[name].default
    assert isinstance(default, str)
    return default


def bounded_int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a whole number") from None
    if not low <= value <= high:
        raise ConfigError(f"{name}={value}: expected {low}..{high}")
    return value
