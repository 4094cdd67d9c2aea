"""The heavier `pgkick` commands: demo, bench, awake, ui (they start servers and processes).

Why apart from cli.py: the operations commands stay a screen long, and these
pull in the embedded server, the local kicker and the picture writer only when
asked for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgkick.cli.types import schema_name, seconds
from pgkick.errors import UsageError
from pgkick_dev import scratch
from pgkick_dev.awake.monitor import DEFAULT_WINDOW, AwakeMonitor
from pgkick_dev.demo import report as demo_report
from pgkick_dev.demo import scenario as demo

# The artifact's cold import first: an absolute single-process time, not a pair, and this
# VM runs slower after minutes of load (worker 371 ms at the end of a full run, 225-248 ms
# alone, the same artifact; README, Performance).
ITEMS = (
    "artifact,article_table,sql_ceiling,drain,enqueue,kick_to_start,producer_threads,kicks,"
    "trickle,dependencies,cold_path,scale,claim_order,awake,quiet_day,delayed_bookings,cost"
)
Command = Callable[[str, Callable[[argparse.Namespace], dict[str, Any]]], argparse.ArgumentParser]


def cmd_demo(args: argparse.Namespace) -> dict[str, Any]:
    """Start an embedded PostgreSQL 17 and play a day of pgkick on it, then report."""
    # the picture writer (matplotlib, ~0.4 s) only when a command draws: every `pgkick`
    # command builds this parser (a review found 6 s a command on a loaded machine)
    from pgkick_dev.awake.chart import Lane, render
    from pgkick_dev.awake.compare import Workload, compare
    from pgkick_dev.awake.compare import lanes as compare_lanes

    dsn = args.dsn  # never $DATABASE_URL: that is an app's database
    if dsn:
        scratch.claim(dsn, "demo")  # refuses a database holding jobs it did not create
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)
    server = None
    folder = (
        Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="data-", dir=out))
    )
    if not dsn:
        from pgkick_dev.embedded import EmbeddedPostgres

        print(f"== starting PostgreSQL 17 in {folder}", file=sys.stderr)
        print(
            "== the demo takes about 90 s (a day of jobs, then the awake comparison)",
            file=sys.stderr,
        )
        server = EmbeddedPostgres(folder)
        dsn = server.start()
    try:
        options = demo.DemoOptions(
            jobs=args.jobs, window=args.window, workers=args.workers, dsn=dsn, out=out
        )
        run = demo.run(options)
        summary = demo_report.summarise(run, args.jobs)
        comparison: list[dict[str, Any]] = []
        lanes = [Lane("pgkick demo", run.timeline, fraction=run.awake.get("awake_fraction"))]
        if not args.no_compare:
            results = compare(
                dsn,
                Workload(window=2.0),
                log=out / "workers.log",
                progress=lambda text: print(f"== {text}", file=sys.stderr),
            )
            comparison = [r.as_dict() for r in results]
            lanes += compare_lanes(results)
        duration = max((lane.timeline[-1][0] for lane in lanes if lane.timeline), default=1.0)
        picture = render(out / "awake.png", lanes, duration)
        summary.update(comparison=comparison, picture=str(picture), logs=str(out))
        if not args.json:
            print(demo_report.render(summary, comparison))
            print(f"timeline picture: {picture}\nworkers' logs: {out / 'workers.log'}")
        return summary
    finally:
        if server is not None:
            server.stop()
            if args.keep:
                print(f"== kept the database folder {folder}", file=sys.stderr)
            else:
                demo.cleanup(folder)


def cmd_awake(args: argparse.Namespace) -> dict[str, Any]:
    """Watch a database the way a scale-to-zero compute does, and report awake time."""
    from pgkick_dev.awake.chart import Lane, render  # (cmd_demo says why here)

    dsn = args.dsn or os.environ.get("DATABASE_URL")
    if not dsn:
        raise ValueError("no database: pass --dsn or set DATABASE_URL")
    monitor = AwakeMonitor(
        dsn,
        window=args.window,
        interval=args.interval,
        close_on_suspend=args.close_on_suspend,
        ignore=frozenset(args.ignore),
    ).start()
    try:
        deadline = time.monotonic() + args.duration if args.duration else None
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    report = monitor.stop()
    result = report.as_dict()
    if args.png:
        render(Path(args.png), [Lane("database", report.timeline)], report.duration)
        result["picture"] = args.png
    return result


def cmd_bench(args: argparse.Namespace) -> dict[str, Any]:
    """Measure pgkick side by side with the SQL ceiling and the article's table, in one run."""
    from pgkick_dev.bench import figures as bench_figures
    from pgkick_dev.bench import markdown as bench_markdown
    from pgkick_dev.bench import repeat as bench_repeat
    from pgkick_dev.bench import report as bench_report
    from pgkick_dev.bench import runner as bench
    from pgkick_dev.embedded import EmbeddedPostgres, binaries_dir

    if args.repeat is not None and args.repeat < 1:
        raise ValueError(f"--repeat must be 1 or more, not {args.repeat}")
    dsn = args.dsn  # never $DATABASE_URL: the bench empties the jobs table it uses
    if dsn:
        scratch.claim(dsn, "bench")  # refuses a database holding jobs it did not create
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)
    folder = Path(tempfile.mkdtemp(prefix="bench-data-", dir=out))
    server = None
    if not dsn:
        # pg_stat_statements: the peers' idle query rate is counted with it
        settings = {"max_connections": "100", "shared_preload_libraries": "'pg_stat_statements'"}
        server = EmbeddedPostgres(folder, settings=settings)
        dsn = server.start()
    try:
        if server is not None:
            scratch.claim(dsn, "bench")  # a new server: migrated and marked as the bench's
        runner = bench.Bench(
            dsn,
            server.tool("pgbench").parent if server else binaries_dir(),
            bench.QUICK if args.quick else bench.Sizes(),
            out / "workers.log",
            say=lambda text: print(f"== {text}", file=sys.stderr),
        )
        if args.peers:
            runner.item_peers = ("pgqueuer", "procrastinate")
        started = time.monotonic()
        date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        items = [i.strip() for i in args.items.split(",")] + (["peers"] if args.peers else [])
        repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
        repeated = False
        for item in items:
            if item not in bench_repeat.REPEATED:
                getattr(runner, item)()
            elif not repeated:  # all the compared items, interleaved, where the first stood
                bench_repeat.run(runner, items, repeat)
                repeated = True
        results = {
            **runner.results,
            "date": date,
            "repeat": repeat,
            "seconds": round(time.monotonic() - started),
            "quick": args.quick,
        }
        results["targets"] = bench_report.targets(results)
        results["repeats"] = bench_figures.summary(results)
        report = bench_markdown.render(results)
        (out / "bench.json").write_text(json.dumps(results, indent=1, default=str))
        (out / "bench.md").write_text(report)
        if not args.json:
            print(report)
            print(f"written: {out / 'bench.json'}, {out / 'bench.md'}")
        return results
    finally:
        if server is not None:
            server.stop()
        demo.cleanup(folder)


def cmd_ui(args: argparse.Namespace) -> dict[str, Any]:
    """Serve the web dashboard for one database (read-only unless --allow-actions)."""
    import uvicorn

    from pgkick_dev.ui.app import make_app  # starlette and uvicorn: only when asked for
    from pgkick_dev.ui.guard import LOCALHOST

    dsn = args.dsn or os.environ.get("DATABASE_URL")
    if not dsn:  # never a database nobody named
        raise ValueError("no database: pass --dsn or set DATABASE_URL")
    local = args.host is None
    host = "127.0.0.1" if local else args.host
    if local and args.allowed_host:
        raise UsageError("--allowed-host names the dashboard served with --host: give --host")
    names = [] if local else [host, *args.allowed_host]  # the Host headers answered
    app = make_app(
        dsn,
        allow_actions=args.allow_actions,
        allowed_hosts=LOCALHOST if local else None,
        host_names=names,
        schema=args.schema,
    )
    mode = "actions allowed" if args.allow_actions else "read-only"
    reach = "this machine only" if local else f"anyone who can reach {host}"
    if not local:
        reach += f", as {', '.join(names)}, localhost or an IP address (or --allowed-host NAME)"
    print(f"pgkick ui: http://{host}:{args.port}/ ({mode}, {reach})", file=sys.stderr)
    uvicorn.run(app, host=host, port=args.port, log_level="warning")
    return {}


def add_tool_commands(command: Command) -> None:
    from pgkick_dev.devserver.cli import add_dev_command

    add_dev_command(command)
    bench_cmd = command("bench", cmd_bench)
    bench_cmd.add_argument("--quick", action="store_true", help="tiny sizes: under a minute")
    bench_cmd.add_argument("--items", default=ITEMS, help=f"comma-separated (default {ITEMS})")
    bench_cmd.add_argument(
        "--repeat",
        type=int,
        help="runs of the compared items (sql_ceiling, drain, peers), interleaved; "
        "default 3 (1 with --quick)",
    )
    bench_cmd.add_argument(
        "--peers",
        action="store_true",
        help="also pgqueuer and procrastinate on the same jobs (the extra pgkick[peers])",
    )
    bench_cmd.add_argument(
        "--out",
        default=str(Path(tempfile.gettempdir()) / "pgkick-bench"),
        help="folder for bench.json, bench.md and the workers' log",
    )
    demo_cmd = command("demo", cmd_demo)
    demo_cmd.add_argument("--jobs", type=int, default=2_000, help="jobs in the first burst")
    demo_cmd.add_argument("--workers", type=int, default=4, help="local concurrency cap")
    demo_cmd.add_argument(
        "--window",
        type=float,
        default=5.0,
        help="compressed suspend window in seconds (Relyt One: 600)",
    )
    demo_cmd.add_argument("--data-dir", help="database folder (default: a new temporary one)")
    demo_cmd.add_argument("--keep", action="store_true", help="keep the database folder")
    demo_cmd.add_argument(
        "--no-compare", action="store_true", help="skip the pgkick / poll / listen awake comparison"
    )
    demo_cmd.add_argument(
        "--out",
        default=str(Path(tempfile.gettempdir()) / "pgkick-demo"),
        help="folder for the picture and the workers' logs",
    )
    for sub in (bench_cmd, demo_cmd):  # never $DATABASE_URL: that is an app's database
        for action in sub._actions:
            if "--dsn" in action.option_strings:
                action.help = (
                    "a database of its own on your server (refused if it holds jobs it did "
                    "not create); default: an embedded server, never $DATABASE_URL"
                )
    awake = command("awake", cmd_awake)
    awake.add_argument(
        "--window",
        type=seconds(0, 86_400),
        default=DEFAULT_WINDOW,
        help="seconds without activity before the compute suspends",
    )
    awake.add_argument(
        "--duration", type=seconds(0, 30 * 86_400), help="stop after this many seconds"
    )
    awake.add_argument("--interval", type=seconds(0, 60), default=0.5, help="seconds between looks")
    awake.add_argument(
        "--close-on-suspend",
        action="store_true",
        help="terminate client sessions at suspend, like a real suspension",
    )
    awake.add_argument(
        "--ignore", action="append", default=[], help="application_name to leave out (repeatable)"
    )
    awake.add_argument("--png", help="write a timeline picture here")
    ui = command("ui", cmd_ui)
    ui.add_argument("--port", type=int, default=3002, help="port to serve on (3002)")
    ui.add_argument(
        "--host",
        help="address to serve on, and answer clients other than this machine "
        "(default: 127.0.0.1, this machine only)",
    )
    ui.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --host: a host name the dashboard is reached by (repeatable); a request "
        "naming another (DNS rebinding) is refused",
    )
    ui.add_argument(
        "--allow-actions", action="store_true", help="show and accept retry and cancel buttons"
    )
    ui.add_argument(
        "--schema",
        type=schema_name,
        help="schema of pgkick's tables (default: $PGKICK_SCHEMA, pgkick)",
    )
