"""The bench's cost arithmetic, exactly: Lambda's 1 ms rounding, GB-seconds, the price
table applied line by line, a run scaled to a day (its safety wake-ups added), the SQS
model and the linger rule.

No server: the measuring is tests/test_bench.py's (`--quick` runs the items); here fixed
runs and a price table of round numbers go in and every figure is checked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pgkick_dev.bench import cost as bench_cost
from pgkick_dev.bench import cost_model as model
from pgkick_dev.bench import cost_table
from pgkick_dev.bench.prices import Prices, template_memory_mb

ROUND = Prices(
    lambda_per_million_requests=1.0,
    lambda_per_gb_second=0.001,
    scheduler_per_million_invocations=2.0,
    secrets_per_10k_calls=0.5,
    secret_per_month=3.0,
    sqs_per_million_requests=4.0,
    sqs_idle_pollers=5,
    sqs_long_poll_seconds=20.0,
    fargate_per_vcpu_hour=1.0,
    fargate_per_gb_hour=0.5,
    fargate_vcpu=0.25,
    fargate_gb=0.5,
    neon_per_cu_hour=2.0,
    neon_compute_units=0.25,
)


@pytest.mark.parametrize(
    ("duration_ms", "billed"),
    [(12.0, 12), (12.0001, 13), (12.9, 13), (0.2, 1), (0.0, 1), (0.1 + 0.2 + 11.7, 12)],
)
def test_each_invocation_is_rounded_up_to_the_next_millisecond(
    duration_ms: float, billed: int
) -> None:
    assert model.billed_ms(duration_ms) == billed


def test_gb_seconds_are_billed_seconds_times_memory_in_gb() -> None:
    assert model.gb_seconds(1_000, 512) == 0.5
    assert model.gb_seconds(3_000, 1024) == 3.0
    assert model.gb_seconds(1, 128) == pytest.approx(0.000125)


def test_the_price_table_is_applied_line_by_line() -> None:
    day = model.Day(
        system="x",
        jobs=10,
        invocations=2_000_000,  # 2 x $1
        billed_ms=4_000_000,  # 4,000 s at 0.5 GB = 2,000 GB-s x $0.001
        memory_mb=512,
        scheduler_invocations=500_000,  # 0.5 x $2
        secret_calls=20_000,  # 2 x $0.5, and a day of $3 a month
        sqs_requests=250_000,  # 0.25 x $4
        fargate_hours=24.0,  # 24 x (0.25 x $1 + 0.5 x $0.5)
        database_hours=10.0,  # 10 x 0.25 CU x $2
    )
    bill = model.price(day, ROUND)
    assert bill == {
        "lambda_requests": 2.0,
        "lambda_duration": 2.0,
        "scheduler": 1.0,
        "secrets": 1.1,
        "sqs": 1.0,
        "fargate": 12.0,
        "database": 5.0,
        "total": 24.1,
    }
    assert model.price(replace(day, secret_calls=0), ROUND)["secrets"] == 0.0


def test_a_database_is_awake_for_each_period_up_to_the_suspend_window() -> None:
    assert model.awake_hours(60.0, 1.0, 300.0) == 24.0  # a job a minute: never suspends
    assert model.awake_hours(model.DAY, 600.0, 300.0) == 0.25  # 10 min of burst + 5 min
    assert model.awake_hours(3600.0, 0.0, 300.0) == 2.0  # hourly, idle: a window an hour


def test_secret_reads_are_one_per_cold_start_and_cache_lifetime_at_most_per_invocation() -> None:
    assert model.secret_calls(1_440, 1, model.DAY, 1) == 289
    assert model.secret_calls(10, 4, model.DAY, 4) == 10
    assert model.secret_calls(100, 3, 60.0, 3) == 4  # 3 + 3 x 60 / 300 = 3.6


def _run(kind: str, linger: int, **figures: object) -> dict[str, object]:
    base: dict[str, object] = {
        "workload": kind,
        "linger_ms": linger,
        "jobs": 10,
        "seconds": 10.0,
        "invocations": 10,
        "cold_starts": 0,
        "billed_ms": 1_000,
        "billed_ms_cold": 0,
        "duration_p50_ms": 100.0,
        "duration_max_ms": 100.0,
        "schedules_fired": 0,
        "schedules_created": 10,
        "kicks": 10,
        "empty_ms": 20.4,
        "awake_seconds": 5.0,
        "commit_to_claim_p99_ms": 50.0,
        "exactly_once": True,
    }
    return {**base, **figures}


def test_a_trickle_run_is_scaled_per_job_to_a_day_with_its_cold_start_once() -> None:
    run = _run("trickle", 0, invocations=11, cold_starts=1, billed_ms=2_000, billed_ms_cold=1_000)
    day = bench_cost.pgkick_day(run, 512, 300.0)  # type: ignore[arg-type]
    # 10 warm invocations of 100 ms for 10 jobs: x144 for 1,440 jobs; the cold one once;
    # each job's kick (in a minute of its own) is followed by a safety that finds nothing
    assert day.invocations == 1_440 + 1 + 1_440 + 1  # and the daily reaper
    assert day.billed_ms == 144_000 + 1_000 + 1_440 * 21 + bench_cost.REAPER_MS
    assert day.database_hours == 24.0 and day.scheduler_invocations == 1_440 + 1
    # 10 bookings in 11 invocations: 1,441 x 10 / 11; and the safeties' own
    assert day.scheduler_calls == 1_310 + 1_440
    assert day.secret_calls == 289


def test_one_worker_that_ran_throughout_hands_over_at_its_timeout_not_per_run() -> None:
    run = _run(
        "steady",
        1000,
        jobs=200,
        seconds=20.0,
        invocations=1,
        billed_ms=20_000,
        duration_max_ms=20_000.0,
    )
    day = bench_cost.pgkick_day(run, 512, 300.0)  # type: ignore[arg-type]
    # a day of 300 s invocations, each hand-over's safety (no producer kicks a watched
    # queue: the run's one kick was its start), and the reaper
    assert day.invocations == 288 + 288 + 1
    assert day.billed_ms == 86_400_000 + 288 * 21 + bench_cost.REAPER_MS  # the whole day
    assert day.scheduler_calls == 288 * 10 + 288  # bookings per invocation as measured
    # its last linger (1 s after the last job) scaled with the run would bill 21 s of 20
    longer = bench_cost.pgkick_day({**run, "billed_ms": 21_000}, 512, 300.0)  # type: ignore[arg-type]
    assert longer.billed_ms == day.billed_ms  # never past 288 timeouts a day


def test_safeties_are_one_per_minute_with_a_kick_never_more_than_the_kicks() -> None:
    assert model.safeties(864_000, 1_440) == 1_440  # a kick per job at 10 jobs/s
    assert model.safeties(288, 1_440) == 288  # hand-overs only
    assert model.safeties(0, 1_440) == 0
    assert model.safeties(2.5, 1) == 1  # a burst's kicks inside its one minute
    steady = _run("steady", 0, jobs=200, seconds=20.0, invocations=200, kicks=200)
    day = bench_cost.pgkick_day(steady, 512, 300.0)  # type: ignore[arg-type]
    # a job's invocation each, the environment's start once, a safety a minute, the reaper
    assert day.invocations == 864_000 + 1 + 1_440 + 1 and day.scheduler_invocations == 1_441


def test_a_burst_stays_awake_until_its_safety_has_run() -> None:
    # 20,000 jobs with 2 s of activity: x5 = 10 s, yet the safety comes ~90 s after the kick
    burst = _run("burst", 0, jobs=20_000, seconds=4.0, awake_seconds=2.5, kicks=1)
    day = bench_cost.pgkick_day(burst, 512, 300.0)  # type: ignore[arg-type]
    awake_s = bench_cost.SAFETY_AFTER_S + 0.0204 + 300.0  # then Neon's suspend window
    # the burst's hours (rounded to 3 places, as awake_hours gives them) and the reaper's
    assert day.database_hours == round(round(awake_s / 3600, 3) + 300.0 / 3600, 3)
    assert day.scheduler_invocations == 1 + 1  # one safety (one minute of kicks), the reaper


def test_the_sqs_model_bills_a_send_receive_and_delete_per_batch_and_the_idle_polls() -> None:
    day = model.sqs_lambda(
        1_000,
        job_ms=2.5,
        batch=10,
        overhead_ms=40.0,
        memory_mb=512,
        secrets=3,
        database_hours=1.0,
        prices=ROUND,
    )
    assert day.invocations == 100 and day.billed_ms == 100 * 65
    assert day.sqs_requests == 1_000 + 2 * 100 + 5 * 86_400 // 20


def test_the_linger_rule_takes_the_fastest_within_ten_percent_of_the_cheapest() -> None:
    def row(kind: str, linger: int, total: float, p99: float) -> dict[str, object]:
        return {
            "workload": kind,
            "linger_ms": linger,
            "bill": {"total": total},
            "commit_to_claim_p99_ms": p99,
        }

    days = [
        row("trickle", 0, 1.00, 80.0),
        row("trickle", 250, 1.02, 60.0),
        row("trickle", 1000, 1.05, 60.0),
        row("steady", 0, 2.00, 900.0),
        row("steady", 250, 2.10, 20.0),
        row("steady", 1000, 2.60, 15.0),  # fastest, but 30% dearer than the cheapest
        {"workload": "steady", "linger_ms": None, "bill": {"total": 0.5}},  # a model's row
    ]
    chosen = cost_table.choose_linger(days)
    assert chosen["acceptable_ms"] == [0, 250] and chosen["chosen_ms"] == 250


def test_the_worker_memory_is_read_from_the_template(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    assert template_memory_mb(root)[1] == "template.yaml"
    (tmp_path / "template.yaml").write_text("Globals:\n  Function:\n    MemorySize: 1769\n")
    assert template_memory_mb(tmp_path) == (1769, "template.yaml")
    assert template_memory_mb(None)[1].startswith("assumed")
