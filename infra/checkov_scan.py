"""checkov, a third-party scanner, on the transformed template, with its skips justified here.

Why a second opinion: pgkick's own rules (ops_checks.py) check what pgkick needs; checkov
checks what any AWS template is expected to get right (IAM without wildcards or privilege
escalation, secrets in environments, log retention, deprecated runtimes), written by
people who do not know this app. The checks it fails that do not apply to pgkick are
skipped here, in SKIPPED, each with the reason in one line, and nowhere else. A skipped
check that starts passing is reported too (the skip is stale: remove it), so the list
stays the set of checks that really fail.

checkov lives in its own virtual environment (.venv-checkov, from
infra/checkov-requirements.txt, every version pinned): it pins boto3 and packaging apart
from SAM CLI. `--skip-download` keeps it offline (no guideline links, same checks).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
INSTALL = (
    "uv venv --python 3.12 .venv-checkov && "
    "VIRTUAL_ENV=.venv-checkov uv pip install -r infra/checkov-requirements.txt"
)

SKIPPED = {
    "CKV_AWS_27": "FailedKicksQueue is encrypted at rest by SQS (SqsManagedSseEnabled); "
    "the check only accepts a KMS key",
    "CKV_AWS_26": "AlarmTopic carries alarm names and states, no job data; a KMS key would "
    "need a key policy admitting CloudWatch, or alarms are never delivered",
    "CKV_AWS_158": "CloudWatch Logs encrypts every log group at rest already; a customer key "
    "costs $1/month and a key policy, for job ids and error messages",
    "CKV_AWS_116": "both functions send failed async events to FailedKicksQueue through "
    "EventInvokeConfig OnFailure (a destination supersedes a DLQ); the check only reads "
    "DeadLetterConfig",
    "CKV_AWS_173": "the environments hold no secret (the DSN is read from Secrets Manager "
    "by ARN); Lambda encrypts them at rest with an AWS key already",
}


@dataclass(frozen=True)
class Scan:
    """One checkov run: the failures that count, and one line per skip, for the log."""

    problems: list[str]
    notes: list[str]


def start(transformed: Path, checkov: Path = CHECKOV) -> subprocess.Popen[str] | None:
    """Start checkov in the background (it takes ~10 s, as long as cfn-lint: run both)."""
    if not checkov.exists():
        return None
    return subprocess.Popen(
        [
            str(checkov),
            "--file",
            str(transformed),
            "--framework",
            "cloudformation",
            "--skip-download",
            "--output",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(running: subprocess.Popen[str] | None, checkov: Path = CHECKOV) -> Scan:
    """Wait for checkov and sort its failures into problems and justified skips."""
    if running is None:
        return Scan([f"CKV0000 checkov not installed at {checkov}: {INSTALL}"], [])
    out, err = running.communicate(timeout=600)
    try:
        report = json.loads(out)
        results = report["results"]
    except (ValueError, KeyError, TypeError):
        return Scan([f"CKV0000 checkov gave no report (exit {running.returncode}): {err}"], [])
    failed = results.get("failed_checks", [])
    problems = [
        f"{check['check_id']} {check['resource']}: {check['check_name']}"
        for check in failed
        if check["check_id"] not in SKIPPED
    ]
    failing = {check["check_id"] for check in failed}
    problems += [
        f"{check_id} passes now: remove its skip from infra/checkov_scan.py"
        for check_id in sorted(set(SKIPPED) - failing)
    ]
    summary = report["summary"]
    notes = [
        f"checkov {summary['checkov_version']}: {summary['passed']} passed, "
        f"{summary['failed']} failed, of which skipped:",
        *(f"  {check_id}: {reason}" for check_id, reason in SKIPPED.items()),
    ]
    return Scan(problems, notes)
