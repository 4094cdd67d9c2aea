"""Fallback for `infra/rie_invoke.py`: run a built function without Lambda's runtime.

Why: `infra/rie_invoke.py` (the emulator and awslambdaric, Lambda's own runtime)
is the way to invoke the artifact locally; this plain path is used only where no
emulator binary matches the machine or awslambdaric is not installed, and
rie_invoke says so when it falls back. It also holds the template reading
(Globals merged, SAM's --env-vars format) that rie_invoke reuses. It runs it as
Lambda would import it: a separate Python 3.12 with no site-packages (only the
artifact's folder and the standard library), the function's environment from
the built template (Globals merged), the `--env-vars` file's overrides in SAM's
format, the event file, and a fake context with the function's timeout.

    uv run python infra/local_invoke.py WorkerFunction -e infra/events/kick.json \\
        --env-vars infra/env.json [--build-dir .aws-sam/build]

Prints the handler's JSON result on the last line of stdout; exits 1 if it raised or
its answer is not JSON (marshalled by awslambdaric when importable, else by plain
`json.dumps`, never `default=str`, which hid a reaper answer Lambda cannot send).
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

import yaml

ROOT = Path(__file__).resolve().parent.parent
RESULT_MARK = "pgkick-local-invoke-result: "
BOOTSTRAP = f"""
import json, os, sys
sys.path.insert(0, os.environ["LAMBDA_TASK_ROOT"])
module_name, function_name = os.environ["_HANDLER"].rsplit(".", 1)
handler = getattr(__import__(module_name, fromlist=[function_name]), function_name)
from pgkick_dev.local.context import FakeLambdaContext
context = FakeLambdaContext(function_name=os.environ["AWS_LAMBDA_FUNCTION_NAME"],
                            timeout_ms=int(os.environ["AWS_LAMBDA_FUNCTION_TIMEOUT"]) * 1000)
event = json.loads(sys.stdin.read())
result = handler(event, context)
try:  # Lambda's own marshaller, when the artifact carries it: what AWS would send back
    from awslambdaric.lambda_runtime_marshaller import to_json
except ImportError:  # plain JSON, no default=str: an answer AWS cannot send fails here too
    to_json = json.dumps
print({RESULT_MARK!r} + to_json(result), flush=True)
"""


class _Loader(yaml.SafeLoader):
    """Reads CloudFormation's short tags (!Ref, !Sub, ...) as {"Ref": ...} dicts."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = str(value).split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_Loader.add_multi_constructor("!", _intrinsic)


def function_config(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    resources = template.get("Resources", {})
    if logical_id not in resources:
        functions = [k for k, v in resources.items() if v["Type"] == "AWS::Serverless::Function"]
        raise SystemExit(f"no function {logical_id!r} in the template; it has {functions}")
    merged = dict(template.get("Globals", {}).get("Function", {}))
    props = resources[logical_id]["Properties"]
    env = {
        **merged.get("Environment", {}).get("Variables", {}),
        **props.get("Environment", {}).get("Variables", {}),
    }
    return {**merged, **props, "Environment": env}


def resolve(value: Any, parameters: dict[str, Any]) -> str:
    """Plain values as they are; a Ref to a parameter is its default; other intrinsics ''."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return str(parameters.get(value["Ref"], {}).get("Default", ""))
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        # A local stack named "pgkick" (samconfig.toml's): e.g. the metrics' service
        # dimension ${AWS::StackName}-worker; anything else it cannot know stays ''.
        names = {"AWS::StackName": "pgkick"} | {
            name: str(spec.get("Default", "")) for name, spec in parameters.items()
        }
        text, known = value["Fn::Sub"], True
        for name in re.findall(r"\$\{([^}]+)\}", text):
            known = known and name in names
            text = text.replace("${" + name + "}", names.get(name, ""))
        return text if known else ""
    return "" if isinstance(value, dict | list) else str(value)


def environment(template: dict[str, Any], logical_id: str, env_file: Path | None) -> dict[str, str]:
    config = function_config(template, logical_id)
    parameters = template.get("Parameters", {})
    env = {name: resolve(value, parameters) for name, value in config["Environment"].items()}
    if env_file is not None:  # SAM's format: {"Parameters": {...}, "<LogicalId>": {...}}
        overrides = json.loads(env_file.read_text())
        for section in ("Parameters", logical_id):
            env.update({k: str(v) for k, v in overrides.get(section, {}).items() if k in env})
    timeout = resolve(config.get("Timeout", 3), parameters) or "3"
    region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    return {
        **env,
        "AWS_LAMBDA_FUNCTION_NAME": logical_id,
        "AWS_LAMBDA_FUNCTION_TIMEOUT": timeout,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "_HANDLER": config["Handler"],
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TZ": ":UTC",
    }


def invoke(
    logical_id: str,
    event: Path,
    *,
    build_dir: Path,
    env_file: Path | None,
    python: str = sys.executable,
) -> tuple[int, dict[str, Any] | None, str]:
    """Run the handler once; returns (exit code, its result, everything it printed)."""
    template_path = build_dir / "template.yaml"
    if not template_path.exists():
        raise SystemExit(f"{template_path} is missing: run `sam build` first")
    template = yaml.load(template_path.read_text(), Loader=_Loader)
    code_dir = (build_dir / str(function_config(template, logical_id)["CodeUri"])).resolve()
    env = environment(template, logical_id, env_file) | {"LAMBDA_TASK_ROOT": str(code_dir)}
    done = subprocess.run(
        [python, "-I", "-S", "-c", BOOTSTRAP],
        input=event.read_text(),
        env=env,
        cwd=code_dir,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout + done.stderr
    results = [
        line[len(RESULT_MARK) :]
        for line in done.stdout.splitlines()
        if line.startswith(RESULT_MARK)
    ]
    return done.returncode, json.loads(results[-1]) if results else None, output


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("function", help="logical id, e.g. WorkerFunction")
    parser.add_argument("-e", "--event", type=Path, required=True)
    parser.add_argument("-n", "--env-vars", type=Path)
    parser.add_argument("--build-dir", type=Path, default=ROOT / ".aws-sam" / "build")
    args = parser.parse_args(argv)
    code, result, output = invoke(
        args.function, args.event, build_dir=args.build_dir, env_file=args.env_vars
    )
    print(output, end="")
    return 0 if code == 0 and result is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
