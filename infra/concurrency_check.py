"""Before `sam deploy`: can this account give the reservations the stack asks for?

Why: Lambda keeps 100 of the account's regional concurrency unreserved, so all
reservations together may be at most the quota - 100. A new account's quota can be
as low as 10, and a deploy asking for more fails late, in CloudFormation, with
"... decreases account's UnreservedConcurrentExecution below its minimum value of
[100]" (or [10]), after the stack has started to change. This asks Lambda first
(GetAccountSettings), counts back what the stack's own functions hold already (an
update moves their reservations, it does not add to them), and refuses, naming the
largest WorkerReservedConcurrency that would deploy (0 always does).

    python -m infra.concurrency_check --worker 10 [--reaper 1] [--stack pgkick]

Exit 0: the account can give it; 1: it cannot (the message says what would work);
2: AWS could not be asked (credentials, region, permission: lambda:GetAccountSettings,
and lambda:GetFunctionConcurrency on the stack's functions with --stack).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

UNRESERVED_MINIMUM = 100  # Lambda's floor for functions without a reservation


@dataclass(frozen=True)
class Verdict:
    ok: bool
    largest_worker: int  # the most WorkerReservedConcurrency the account can give now
    message: str


def held_by(client: Any, function: str) -> int:
    """The reservation a function of the stack holds now (0 if none, or no such function)."""
    try:
        answer = client.get_function_concurrency(FunctionName=function)
    except client.exceptions.ResourceNotFoundException:
        return 0
    return int(answer.get("ReservedConcurrentExecutions") or 0)


def check(client: Any, worker: int, reaper: int, stack: str | None = None) -> Verdict:
    """Whether `worker` + `reaper` reserved executions fit what the account leaves."""
    if worker < 0 or reaper not in (0, 1):
        raise SystemExit("--worker must be 0 or more, --reaper 0 or 1")
    limits = client.get_account_settings()["AccountLimit"]
    quota = int(limits["ConcurrentExecutions"])
    unreserved = int(limits["UnreservedConcurrentExecutions"])
    ours = 0
    if stack:  # an update: the stack's current reservations come back to the pool
        ours = held_by(client, f"{stack}-worker") + held_by(client, f"{stack}-reaper")
    room = unreserved + ours - UNRESERVED_MINIMUM  # what may still be reserved
    wanted = worker + reaper
    largest = max(room - reaper, 0)
    if worker == 0 and reaper == 0:
        return Verdict(True, largest, "no reservation asked: deploys on any account")
    if wanted <= room:
        return Verdict(
            True,
            largest,
            f"ok: {wanted} reserved of the {room} the account can still reserve "
            f"(quota {quota}, {unreserved} unreserved, Lambda keeps {UNRESERVED_MINIMUM})",
        )
    if largest > 0:
        fix = f"WorkerReservedConcurrency={largest} would deploy, or 0 (no reservation)"
    elif reaper:
        fix = "reserve nothing: WorkerReservedConcurrency=0 ReaperReservedConcurrency=0"
    else:
        fix = "WorkerReservedConcurrency=0 (no reservation)"
    return Verdict(
        False,
        largest,
        f"refused: the stack reserves {wanted} (worker {worker} + reaper {reaper}) but the "
        f"account can reserve {max(room, 0)} (quota {quota}, {unreserved} unreserved"
        f"{f', {ours} held by the stack' if ours else ''}; Lambda keeps "
        f"{UNRESERVED_MINIMUM} unreserved): {fix}; or ask AWS for a higher concurrency "
        "quota (Service Quotas, Lambda, Concurrent executions)",
    )


def main(argv: list[str] | None = None, client: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.concurrency_check")
    parser.add_argument("--worker", type=int, required=True, help="WorkerReservedConcurrency")
    parser.add_argument("--reaper", type=int, default=0, help="ReaperReservedConcurrency")
    parser.add_argument("--stack", help="the stack's name, when it exists already (update)")
    parser.add_argument("--region", help="the stack's region (else the default region)")
    args = parser.parse_args(argv)
    try:
        if client is None:
            import boto3

            client = boto3.client("lambda", region_name=args.region)
        verdict = check(client, args.worker, args.reaper, args.stack)
    except Exception as exc:
        from botocore.exceptions import BotoCoreError, ClientError

        if not isinstance(exc, BotoCoreError | ClientError):
            raise
        print(f"cannot ask Lambda for the account's concurrency: {exc}", file=sys.stderr)
        return 2
    print(verdict.message, file=sys.stdout if verdict.ok else sys.stderr)
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
