"""The SAM transform done offline, then cfn-lint on its output (run with .venv-sam's python).

Why: cfn-lint on the SAM source is blind to values SAM passes through
(`MaximumRetryAttempts: 5`, a bad runtime, `rate(15 minute)`); on the
transformed CloudFormation they are plain properties it checks. The transform
needs the ARNs of the AWS managed policies SAM attaches; they are fixed, so a
table replaces the IAM lookup and no AWS account is needed. Then pgkick's own
rules: E9001 Scheduler expressions, E9002 the worker's RecursiveLoop, and
E9003-E9013 what an operator needs (infra/ops_checks.py). Last, checkov
(infra/checkov_scan.py: its skips, each justified), alongside cfn-lint.

    .venv-sam/bin/python infra/sam_checks.py [TEMPLATE] [--out transformed.json] [--no-checkov]
    .venv-sam/bin/python infra/sam_checks.py --no-checkov T1 T2 ...  # each to T's folder

Several templates (the tests' broken copies) are checked in one process and one cfn-lint
run, whose start-up (its schemas) is most of a check's time: each template's report is
printed under `== TEMPLATE` and ends with `exit N`, N its own verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from samtranslator.public.translator import ManagedPolicyLoader
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkov_scan  # run as a script, from .venv-sam
from ops_checks import all_problems

ROOT = Path(__file__).resolve().parent.parent
MANAGED = {
    name: f"arn:aws:iam::aws:policy/service-role/{name}"
    for name in (
        "AWSLambdaBasicExecutionRole",
        "AWSLambdaVPCAccessExecutionRole",
        "AWSXRayDaemonWriteAccess",
        "AWSLambdaRole",
    )
}


class OfflinePolicies(ManagedPolicyLoader):  # type: ignore[misc]
    def __init__(self) -> None:
        pass

    def load(self) -> dict[str, str]:
        return MANAGED


def transformed(template: Path) -> dict[str, Any]:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    source = yaml_parse(template.read_text())
    # What `sam package` does first: local code folders become S3 objects.
    for holder in [
        source.get("Globals", {}).get("Function", {}),
        *(r.get("Properties", {}) for r in source["Resources"].values()),
    ]:
        if isinstance(holder.get("CodeUri"), str) and not holder["CodeUri"].startswith("s3://"):
            holder["CodeUri"] = "s3://pgkick-artifacts/functions.zip"
    result: dict[str, Any] = transform(source, {}, OfflinePolicies())
    return result


RATE = re.compile(r"^rate\((\d+) (minute|hour|day)(s?)\)$")
AT = re.compile(r"^at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\)$")
CRON = re.compile(r"^cron\((\S+ ){5}\S+\)$")


def schedule_problems(template: dict[str, Any]) -> list[str]:
    """EventBridge Scheduler expressions, which no linter checks: rate(1 minute) but
    rate(15 minutes), never rate(0 ...), cron() with six fields, at(yyyy-mm-ddThh:mm:ss)."""
    problems = []
    for name, resource in template.get("Resources", {}).items():
        if resource.get("Type") != "AWS::Scheduler::Schedule":
            continue
        expression = resource["Properties"].get("ScheduleExpression")
        if isinstance(expression, dict) and "Ref" in expression:
            parameter = template.get("Parameters", {}).get(expression["Ref"], {})
            expression = parameter.get("Default")
        if not isinstance(expression, str):
            continue
        rate = RATE.match(expression)
        plural_ok = rate is not None and int(rate[1]) > 0 and (rate[1] == "1") == (rate[3] == "")
        if not (plural_ok or AT.match(expression) or CRON.match(expression)):
            problems.append(f"E9001 {name}: {expression!r} is not a valid schedule expression")
    return problems


def recursion_problems(template: dict[str, Any]) -> list[str]:
    """The worker kicks itself (re-kicks, fan-out): without RecursiveLoop Allow, Lambda
    drops the event that makes a chain's ~17th invocation, and a long drain stalls."""
    for name, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        if resource.get("Type") == "AWS::Lambda::Function" and (
            properties.get("Handler") == "pgkick.aws.worker.handler"
        ):
            if properties.get("RecursiveLoop") != "Allow":
                return [f"E9002 {name}: the worker invokes itself; set RecursiveLoop: Allow"]
            return []
    return ["E9002 no worker function (Handler pgkick.aws.worker.handler) in the template"]


def pgkick_problems(template: Path, out: Path) -> list[str]:
    """Transform `template` into `out`, then pgkick's own rules on the result."""
    out.parent.mkdir(parents=True, exist_ok=True)
    result = transformed(template)
    out.write_text(json.dumps(result, indent=1))
    return schedule_problems(result) + recursion_problems(result) + all_problems(result)


def cfn_lint(outputs: list[Path]) -> subprocess.CompletedProcess[str]:
    """One cfn-lint run over the transformed outputs, a finding a line (path first).
    W2001 (unused parameter) is ignored: the transform inlines some parameters' values."""
    command = str(Path(sys.executable).parent / "cfn-lint")
    argv = [command, "--format", "parseable", "--ignore-checks", "W2001", "--"]
    return subprocess.run(
        argv + [str(o) for o in outputs], capture_output=True, text=True, check=False
    )


def check_many(templates: list[Path]) -> int:
    """Each template transformed beside itself, one cfn-lint run for all, a report each."""
    outs = [t.parent / "transformed.json" for t in templates]
    found = []
    for template, out in zip(templates, outs, strict=True):
        try:  # a copy SAM refuses to transform is that copy's finding, not the batch's end
            found.append(pgkick_problems(template, out))
        except Exception as exc:  # samtranslator's InvalidDocumentException and kin
            out.unlink(missing_ok=True)
            found.append([f"E0000 the SAM transform failed: {' '.join(str(exc).split())}"])
    lint = cfn_lint([o for o in outs if o.exists()])
    print(lint.stderr, end="")
    worst = 0
    for template, out, problems in zip(templates, outs, found, strict=True):
        lines = [line for line in lint.stdout.splitlines() if line.startswith(f"{out}:")]
        verdict = 1 if problems or lines else 0
        worst = max(worst, verdict)
        print(f"== {template}\n" + "".join(f"{x}\n" for x in problems + lines) + f"exit {verdict}")
    return worst


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("template", nargs="*", type=Path, default=[ROOT / "template.yaml"])
    parser.add_argument("--out", type=Path, help="default .aws-sam/transformed.json")
    parser.add_argument(
        "--no-checkov", action="store_true", help="skip checkov (~10 s): pgkick's rules only"
    )
    args = parser.parse_args(argv)
    if len(args.template) > 1:
        if not args.no_checkov or args.out:
            parser.error("several templates: --no-checkov, and each output beside its template")
        return check_many(args.template)
    args.out = args.out or ROOT / ".aws-sam" / "transformed.json"
    problems = pgkick_problems(args.template[0], args.out)
    scanning = None if args.no_checkov else checkov_scan.start(args.out)
    print("".join(f"{problem}\n" for problem in problems), end="")
    lint = cfn_lint([args.out])
    print(lint.stdout + lint.stderr, end="")
    if not args.no_checkov:
        scan = checkov_scan.finish(scanning)
        problems += scan.problems
        print("".join(f"{line}\n" for line in scan.notes + scan.problems), end="")
    print(f"transformed: {args.out}; cfn-lint exit {lint.returncode}")
    return lint.returncode or (1 if problems else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
