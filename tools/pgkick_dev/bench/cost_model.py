"""The cost model's arithmetic: a day of a workload in billed units, then in dollars.

Why pure functions apart from the measuring (pgkick_dev.bench.cost): the rounding
and the price table are what a reader checks line by line, and tests check them
exactly, with no server. Three systems are priced from the same job durations:
- pgkick: what the local stack measured (invocations, each one's duration rounded up
  to Lambda's 1 ms, Scheduler fires, cold starts), scaled to a day;
- SQS + Lambda: a model: a message per job, the event source mapping's receives and
  deletes, its idle long polls, and an invocation per batch billed the jobs' time;
- an always-on worker: a model: the smallest Fargate task all day, beside a
  database that never suspends.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from pgkick_dev.bench.prices import Prices

DAY = 86_400.0
SECRET_CACHE_SECONDS = 300.0  # pgkick.config: get_secret(max_age=300)


def billed_ms(duration_ms: float) -> int:
    """Lambda's billed duration of one invocation: rounded up to the next 1 ms, at least 1.
    (Rounded to a nanosecond first, so 12.000000000000002 from float sums is 12.)"""
    return max(1, math.ceil(round(duration_ms, 6)))


def gb_seconds(total_billed_ms: int, memory_mb: int) -> float:
    """Lambda's GB-seconds: billed seconds times the configured memory in GB (MB / 1024)."""
    return total_billed_ms / 1000 * memory_mb / 1024


def awake_hours(period_s: float, active_s: float, suspend_s: float) -> float:
    """Hours a day a scale-to-zero database is awake when every `period_s` brings `active_s`
    of activity and it suspends `suspend_s` after the last: each period is awake for
    min(period, active + suspend window)."""
    per_period = min(period_s, active_s + suspend_s)
    return round(DAY / period_s * per_period / 3600, 3)


def secret_calls(invocations: float, cold_starts: float, busy_s: float, environments: int) -> int:
    """GetSecretValue calls a day: one per cold start, and one per cache lifetime (5 min) of
    each environment in use; never more than one per invocation."""
    refreshes = environments * busy_s / SECRET_CACHE_SECONDS
    return math.ceil(min(invocations, cold_starts + refreshes))


def safeties(kicks: float, minutes: float) -> int:
    """Safety wake-ups a day (pgkick.kick.safety): one per queue and minute in which a kick
    was sent (a queue here), so never more than the kicks nor than the minutes they span."""
    return math.ceil(min(kicks, minutes))


@dataclass(frozen=True)
class Day:
    """One system's day of one workload, in the units each service bills."""

    system: str
    jobs: int
    invocations: int = 0
    billed_ms: int = 0
    memory_mb: int = 512
    scheduler_invocations: int = 0  # fires: what Scheduler bills
    scheduler_calls: int = 0  # CreateSchedule calls (wake-ups, rescues): not billed
    secret_calls: int = 0
    sqs_requests: int = 0
    fargate_hours: float = 0.0
    database_hours: float = 0.0

    def gb_seconds(self) -> float:
        return gb_seconds(self.billed_ms, self.memory_mb)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "gb_seconds": round(self.gb_seconds(), 3)}


def price(day: Day, prices: Prices) -> dict[str, float]:
    """Each line of the day's bill in dollars, and the total (the secret's monthly fee
    counted as a thirtieth a day when the system reads a secret at all)."""
    lines = {
        "lambda_requests": day.invocations / 1e6 * prices.lambda_per_million_requests,
        "lambda_duration": day.gb_seconds() * prices.lambda_per_gb_second,
        "scheduler": day.scheduler_invocations / 1e6 * prices.scheduler_per_million_invocations,
        "secrets": day.secret_calls / 1e4 * prices.secrets_per_10k_calls
        + (prices.secret_per_month / 30 if day.secret_calls else 0.0),
        "sqs": day.sqs_requests / 1e6 * prices.sqs_per_million_requests,
        "fargate": day.fargate_hours
        * (
            prices.fargate_vcpu * prices.fargate_per_vcpu_hour
            + prices.fargate_gb * prices.fargate_per_gb_hour
        ),
        "database": day.database_hours * prices.neon_compute_units * prices.neon_per_cu_hour,
    }
    lines = {name: round(value, 6) for name, value in lines.items()}
    lines["total"] = round(sum(lines.values()), 6)
    return lines


def sqs_lambda(
    jobs: int,
    *,
    job_ms: float,
    batch: int,
    overhead_ms: float,
    memory_mb: int,
    secrets: int,
    database_hours: float,
    prices: Prices,
) -> Day:
    """SQS + Lambda, modelled: a SendMessage per job; per batch of `batch` messages one
    invocation billed `overhead_ms` + the batch's job time, one ReceiveMessage that got
    them and one DeleteMessageBatch; and, all day, the mapping's idle long polls. The
    secret is read as often as pgkick's worker reads it, and the database is awake as
    long as under pgkick (the jobs' own code uses it)."""
    invocations = math.ceil(jobs / batch)
    per_invocation = billed_ms(overhead_ms + job_ms * min(batch, jobs))
    idle_polls = prices.sqs_idle_pollers * DAY / prices.sqs_long_poll_seconds
    return Day(
        system=f"SQS + Lambda (batch {batch})",
        jobs=jobs,
        invocations=invocations,
        billed_ms=invocations * per_invocation,
        memory_mb=memory_mb,
        secret_calls=secrets,
        sqs_requests=jobs + 2 * invocations + math.ceil(idle_polls),
        database_hours=database_hours,
    )


def always_on(jobs: int) -> Day:
    """A long-lived worker on the smallest Fargate task, all day, and a database that
    never suspends (it polls or holds LISTEN: DESIGN.md's 'why')."""
    return Day(
        system="always-on worker (Fargate)", jobs=jobs, fargate_hours=24.0, database_hours=24.0
    )
