"""infra/concurrency_check.py: a reservation the account cannot give is refused before
deploying, with the number that would work. moto has no GetAccountSettings, so botocore's
Stubber answers on a real boto3 Lambda client (the request and the answer are checked
against Lambda's own API model)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from infra import concurrency_check

ROOT = Path(__file__).resolve().parent.parent


def settings(quota: int, unreserved: int) -> dict[str, object]:
    return {
        "AccountLimit": {
            "TotalCodeSize": 80530636800,
            "CodeSizeUnzipped": 262144000,
            "CodeSizeZipped": 52428800,
            "ConcurrentExecutions": quota,
            "UnreservedConcurrentExecutions": unreserved,
        },
        "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0},
    }


def client_answering(*answers: tuple[str, dict[str, object], dict[str, object] | None]) -> object:
    client = boto3.client(
        "lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    for operation, response, params in answers:
        if operation == "not_found":
            stubber.add_client_error(
                "get_function_concurrency",
                service_error_code="ResourceNotFoundException",
                http_status_code=404,
                expected_params=params,
            )
        else:
            stubber.add_response(operation, response, params)
    stubber.activate()
    return client


def test_a_new_accounts_quota_of_10_refuses_the_old_default_and_names_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Catches the deploy that fails on a new account (issue #30, defect 1): with a quota of
    10, the old default (worker 10 + reaper 1) cannot be reserved at all."""
    client = client_answering(("get_account_settings", settings(10, 10), {}))
    assert concurrency_check.main(["--worker", "10", "--reaper", "1"], client=client) == 1
    said = capsys.readouterr().err
    assert "refused: the stack reserves 11" in said and "can reserve 0" in said
    assert "WorkerReservedConcurrency=0 ReaperReservedConcurrency=0" in said


def test_a_reservation_above_what_is_left_names_the_largest_that_fits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = client_answering(("get_account_settings", settings(1000, 150), {}))
    assert concurrency_check.main(["--worker", "60", "--reaper", "1"], client=client) == 1
    assert "WorkerReservedConcurrency=49 would deploy" in capsys.readouterr().err
    client = client_answering(("get_account_settings", settings(1000, 150), {}))
    assert concurrency_check.main(["--worker", "49", "--reaper", "1"], client=client) == 0
    assert "ok: 50 reserved of the 50" in capsys.readouterr().out


def test_an_update_counts_back_what_the_stacks_functions_hold(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The stack's own reservations are already out of the unreserved pool: an update that
    keeps them must pass, not be refused for the room it occupies itself."""
    client = client_answering(
        ("get_account_settings", settings(1000, 100), {}),
        (
            "get_function_concurrency",
            {"ReservedConcurrentExecutions": 899},
            {"FunctionName": "shop-worker"},
        ),
        ("not_found", {}, {"FunctionName": "shop-reaper"}),
    )
    argv = ["--worker", "899", "--stack", "shop"]
    assert concurrency_check.main(argv, client=client) == 0, capsys.readouterr().err


def test_no_reservation_deploys_anywhere_and_is_the_templates_default() -> None:
    client = client_answering(("get_account_settings", settings(10, 10), {}))
    assert concurrency_check.main(["--worker", "0"], client=client) == 0
    text = (ROOT / "template.yaml").read_text()
    for parameter in ("WorkerReservedConcurrency", "ReaperReservedConcurrency"):
        block = text.split(f"  {parameter}:\n")[1].split("\n  Description")[0]
        assert "    Default: 0" in block, parameter


def test_aws_unreachable_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    client = boto3.client(
        "lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    stubber.add_client_error("get_account_settings", "AccessDeniedException", http_status_code=403)
    stubber.activate()
    assert concurrency_check.main(["--worker", "5"], client=client) == 2
    assert "AccessDeniedException" in capsys.readouterr().err
