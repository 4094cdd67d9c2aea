"""The SQL-only benchmarks, run by `pgbench` (shipped with the embedded binaries).

Why pgbench: it measures the statements with no Python at all, so it gives the
article's table (the naive claim's double claims against SKIP LOCKED) and the
ceiling the Python drain is held against. The scripts are made from pgkick's own
statements in `pgkick.store.queries`: named parameters become pgbench variables or
literals, and a claimed batch's ids pass to the batch complete through \\gset.

The ceiling does per round trip what a worker does: complete the batch claimed in
the previous round trip and claim the next, one statement (job_complete_and_claim, the
server-side function whose inner plans each session keeps, as the worker's does), one
round trip and one commit; pgbench keeps the claimed ids in the client's variables
for its next transaction. With the extended protocol and no prepared
statement (`-M extended`): the worker never prepares, so that a transaction-mode
pooler can lend it any server connection; every statement sent is planned on each
run, on both sides.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from pgkick.store import queries
from pgkick_dev import queries as dev_queries

FIXED = {"now": "NULL", "queue": "'default'", "lease": "'5 minutes'", "timed": "false"}
NO_RESULTS = "'{}'"  # unnest pads a shorter array with NULLs: no job stores a result


def _bind(sql: str, values: dict[str, str]) -> str:
    """Replace %(name)s with a literal; %% with %; the first line comment is kept."""
    text = re.sub(r"%\((\w+)\)s", lambda m: values[m[1]], sql)
    return text.replace("%%", "%").rstrip().rstrip(";")


def _claim_cte(batch: int) -> str:
    """The worker's claim (job_claim: one call of the server-side claim, migration 0007) as
    the CTE `claimed`, on one line, for a script's WITH list."""
    return f"claimed AS ({_one_line(_bind(queries.JOB_CLAIM, {**FIXED, 'batch': str(batch)}))})"


# The claimed jobs' ids and attempts, one row even when nothing was claimed; a round trip's
# completed ids (a NULL task, job_complete_and_claim) are not kept.
GATHER = (
    "SELECT coalesce(array_agg(id) FILTER (WHERE task IS NOT NULL), '{}') AS ids,"
    " coalesce(array_agg(attempts) FILTER (WHERE task IS NOT NULL), '{}') AS attempts"
    " FROM claimed"
)


def claim_and_complete_batch(batch: int) -> str:
    """pgkick's claim of a batch, its ids gathered (one row even when nothing was claimed),
    then one fenced batch complete. With batch 1 it is the article's claim-then-done."""
    complete = _bind(
        queries.JOB_COMPLETE_MANY,
        {"now": "NULL", "ids": "':ids'", "attempts": "':attempts'", "results": NO_RESULTS},
    )
    return f"WITH {_claim_cte(batch)} {GATHER} \\gset\n{_one_line(complete)};\n"


def complete_then_claim(batch: int) -> str:
    """One round trip, one commit, one statement, as the worker's: job_complete_and_claim
    (migration 0008) completes the ids this client claimed in its previous transaction
    (:ids, :attempts; empty arrays at first; results NULL, as the worker sends them when
    no job returned one) and claims the next batch, whose ids are kept.
    For `-M extended` (variables become parameters, so no quotes around them)."""
    values = {**FIXED, "batch": str(batch), "ids": ":ids", "attempts": ":attempts"}
    # A pgbench script made of queries.* only, never of input:
    round_trip = _one_line(_bind(queries.JOB_COMPLETE_AND_CLAIM, {**values, "results": "NULL"}))
    return f"WITH claimed AS ({round_trip}) {GATHER} \\gset\n"


def insert_one() -> str:
    """pgkick's single insert as the app sends it: one job, one durable commit."""
    values = {
        "now": "NULL",
        "queue": "'default'",
        "task": "'noop'",
        "payload": "'{}'",
        "run_at": "NULL",
        "delay": "'0 seconds'",
        "max_attempts": "5",
        "priority": "0",
        "group_key": "NULL",
        "traceparent": "NULL",  # no span: what an app without OpenTelemetry sends
        "tracestate": "NULL",
        "rate_key": "NULL",
    }
    return _one_line(_bind(queries.JOB_INSERT, values)) + ";\n"


def naive() -> str:
    return _one_line(_bind(dev_queries.JOB_CLAIM_NAIVE, {})) + ";\n"


def _one_line(sql: str) -> str:
    """pgbench reads one statement per line: drop comments, fold the rest."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return " ".join(" ".join(lines).split())


@dataclass
class PgbenchRun:
    seconds: float
    transactions: int
    output: str

    @property
    def rate(self) -> float:
        """pgbench's own transactions a second, its process start and connecting left out
        (on a run of a few hundred transactions they weigh a tenth)."""
        found = re.search(r"^tps = ([0-9.]+) \(without initial connection", self.output, re.M)
        if found is None:
            raise RuntimeError(f"pgbench printed no rate: {self.output.strip()[-300:]}")
        return float(found.group(1))


def pgbench(
    bin_dir: Path,
    dsn: str,
    script: str,
    *,
    clients: int,
    transactions: int,
    mode: str = "simple",
    define: dict[str, str] | None = None,
) -> PgbenchRun:
    """Run `script` `transactions` times on each of `clients` connections; time it all."""
    info = conninfo_to_dict(dsn)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as handle:
        handle.write(script)
    try:
        env = {**os.environ, "PGPASSWORD": str(info.get("password", ""))}
        argv = [
            str(bin_dir / "pgbench"),
            "-n",
            "-M",
            mode,
            *(f"-D{name}={value}" for name, value in (define or {}).items()),
            "-c",
            str(clients),
            "-j",
            str(clients),
            "-t",
            str(transactions),
            "-f",
            handle.name,
            "-h",
            str(info.get("host")),
            "-p",
            str(info.get("port", 5432)),
            "-U",
            str(info.get("user")),
            str(info.get("dbname")),
        ]
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        seconds = time.monotonic() - started
    finally:
        os.unlink(handle.name)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench failed: {done.stderr.strip()[-500:]}")
    return PgbenchRun(seconds, clients * transactions, done.stdout)


def status_counts(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    return {status: {"count": count, "max_attempts": most} for status, count, most in rows}
