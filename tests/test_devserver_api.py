"""The dev server's Lambda Invoke API through boto3 over HTTP: Lambda's status codes, error
shapes and exception classes, and the asynchronous queue's faithfulness (throttle backoff,
freezing, retries, maximum age, loop detection, duplicates, drops). Time is a ManualClock
the test moves; the environments are real processes. Each test names the kindness it
catches; each was checked by making the stand-in kind again and seeing it fail."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from pgkick_dev.devserver.server import make_app
from pgkick_dev.devserver.settings import read_template
from tests.devserver_fixtures import FUNCTION, ROOT, dev_stack


def test_event_is_202_request_response_200_and_errors_are_lambdas() -> None:
    with dev_stack("tests.devserver_handlers:echo") as dev:
        queued = dev.lambda_.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b"{}")
        assert queued["StatusCode"] == 202 and queued["Payload"].read() == b""
        answer = dev.lambda_.invoke(FunctionName=FUNCTION, Payload=json.dumps({"a": 1}))
        assert answer["StatusCode"] == 200 and "FunctionError" not in answer
        assert json.loads(answer["Payload"].read())["echo"] == {"a": 1}
        arn = f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}"
        dry = dev.lambda_.invoke(FunctionName=arn, InvocationType="DryRun")
        assert dry["StatusCode"] == 204
    with dev_stack("tests.devserver_handlers:boom") as dev:
        failed = dev.lambda_.invoke(FunctionName=FUNCTION, Payload=b"{}")
        assert failed["StatusCode"] == 200 and failed["FunctionError"] == "Unhandled"
        error = json.loads(failed["Payload"].read())
        assert error["errorType"] == "ValueError" and error["errorMessage"] == "boom"


def test_bad_input_gets_lambdas_own_exceptions() -> None:
    """Catches: an unknown name run anyway, a body that is not JSON accepted, and no payload
    limit (1 MB asynchronous, 6 MB synchronous, as the Invoke API documents)."""
    with dev_stack() as dev:
        lam = dev.lambda_
        with pytest.raises(lam.exceptions.ResourceNotFoundException, match="Function not found"):
            lam.invoke(FunctionName="no-such-function", InvocationType="Event", Payload=b"{}")
        with pytest.raises(lam.exceptions.InvalidRequestContentException, match="parse"):
            lam.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b"{not json")
        for odd in (b'{"x": NaN}', b"[Infinity]", b"-Infinity"):  # review 61, F2: Python's
            # json takes these, Lambda's parser (strict JSON) refuses them
            with pytest.raises(lam.exceptions.InvalidRequestContentException, match="parse"):
                lam.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=odd)
        # review 61, F1: AWS answers 413 RequestEntityTooLargeException, a code botocore has
        # no class for: `except lam.exceptions.RequestTooLargeException` never catches it
        big = json.dumps({"x": "a" * 1_048_576}).encode()
        with pytest.raises(ClientError) as refused:
            lam.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=big)
        assert refused.value.response["Error"] == {
            "Code": "RequestEntityTooLargeException",
            "Message": f"{len(big)} byte payload is too large for the Event invocation type "
            "(limit 1048576 bytes)",
        }
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413
        huge = json.dumps({"x": "a" * 6_291_456}).encode()
        with pytest.raises(ClientError) as refused:
            lam.invoke(FunctionName=FUNCTION, Payload=huge)
        assert refused.value.response["Error"] == {
            "Code": "RequestEntityTooLargeException",
            "Message": "Request must be smaller than 6291456 bytes for the InvokeFunction "
            "operation",
        }
        # review 61, F4: ClientContext is base64-encoded JSON of 3,583 bytes at most
        good = base64.b64encode(json.dumps({"custom": {"k": "v"}}).encode()).decode()
        lam.invoke(FunctionName=FUNCTION, InvocationType="DryRun", ClientContext=good)
        too_big = base64.b64encode(json.dumps({"custom": {"k": "v" * 2700}}).encode()).decode()
        for context in ("not base64 !", base64.b64encode(b"[1]").decode(), too_big):
            with pytest.raises(lam.exceptions.InvalidRequestContentException, match="lient"):
                lam.invoke(FunctionName=FUNCTION, InvocationType="DryRun", ClientContext=context)
        # review 61, F3: LogType is None or Tail (the model's enum); another is refused
        with pytest.raises(ClientError, match="logType") as refused:
            lam.invoke(FunctionName=FUNCTION, InvocationType="DryRun", LogType="Everything")
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert dev.kinds() == []  # none of them reached the queue


def test_a_throttled_event_backs_off_instead_of_taking_the_freed_slot(tmp_path: Path) -> None:
    """Catches the kindness `instant_throttle` (a throttled event dispatched the moment a slot
    frees): Lambda retries it after 1 s, doubling. And a synchronous invoke with every
    environment busy is refused (429), as Lambda refuses it."""
    gate = tmp_path / "open"
    with dev_stack(
        "tests.devserver_handlers:gate", env={"PGKICK_TEST_GATE": str(gate)}, concurrency=1
    ) as dev:
        lam = dev.lambda_
        lam.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b'{"n": 1}')
        dev.wait(lambda: "invoke_start" in dev.kinds())
        lam.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b'{"n": 2}')
        with pytest.raises(lam.exceptions.TooManyRequestsException) as throttled:
            lam.invoke(FunctionName=FUNCTION, Payload=b"{}")
        # a reserved cap's Reason (note 61: always this one, whatever the cap)
        reason = throttled.value.response["Reason"]  # type: ignore[typeddict-item]
        assert reason == "ReservedFunctionConcurrentInvocationLimitExceeded"
        dev.clock.advance(1)  # the first backoff ends with the slot still busy: 2 s next
        backoffs = [e["detail"] for e in dev.events("throttle") if "backoff" in e["detail"]]
        assert backoffs == ["backoff 1 s", "backoff 2 s"]
        gate.touch()
        dev.wait(lambda: "invoke_end" in dev.kinds())
        assert dev.kinds().count("invoke_start") == 1  # the slot is free, the event still waits
        dev.clock.advance(2)
        dev.wait(lambda: dev.kinds().count("invoke_end") == 2)
        assert dev.stack.functions[FUNCTION].stats.throttles == 1


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_an_environment_is_frozen_between_invocations_and_thawed_on_reuse() -> None:
    """Catches the kindness `freeze=False`: an app's background thread kept running between
    invocations (on Lambda it stops until the next one)."""
    with dev_stack("tests.devserver_handlers:ticker", concurrency=1) as dev:
        first = json.loads(dev.lambda_.invoke(FunctionName=FUNCTION)["Payload"].read())
        dev.wait(lambda: "freeze" in dev.kinds())
        dev.wait(lambda: _state(first["pid"]) == "T", 5)  # stopped: its thread counts nothing
        second = json.loads(dev.lambda_.invoke(FunctionName=FUNCTION)["Payload"].read())
        assert second["pid"] == first["pid"] and "thaw" in dev.kinds()  # the same, warm


def test_a_failed_event_is_retried_after_one_then_two_minutes_then_dropped() -> None:
    """Catches retries sooner than Lambda's (about 1 and 2 minutes) or more than two."""
    with dev_stack("tests.devserver_handlers:boom") as dev:
        dev.lambda_.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b"{}")
        for delay in (60, 120):
            ends = dev.kinds().count("invoke_end") + 1
            dev.wait(lambda n=ends: dev.kinds().count("invoke_end") == n)  # type: ignore[misc]
            dev.clock.advance(delay - 0.5)
            assert dev.kinds().count("invoke_start") == ends  # not yet
            dev.clock.advance(0.5)
        dev.wait(lambda: "drop" in dev.kinds())
        assert dev.kinds().count("invoke_start") == 3 and dev.kinds().count("retry") == 2
        assert dev.events("drop")[0]["detail"].startswith("retries exhausted")


def test_an_event_older_than_the_templates_maximum_age_is_dropped(tmp_path: Path) -> None:
    """Catches a maximum event age other than the template's MaximumEventAgeInSeconds (the
    old stand-in kept events 6 h where the template says 1 h)."""
    age = read_template(ROOT / "template.yaml").max_event_age
    assert age == 3600
    gate = tmp_path / "open"
    with dev_stack(
        "tests.devserver_handlers:gate",
        env={"PGKICK_TEST_GATE": str(gate)},
        concurrency=1,
        max_event_age=age,
    ) as dev:
        lam = dev.lambda_
        lam.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b'{"n": 1}')
        dev.wait(lambda: "invoke_start" in dev.kinds())
        lam.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b'{"n": 2}')
        dev.clock.advance(age - 1)
        assert "drop" not in dev.kinds()
        dev.clock.advance(302)  # the next backoff (5 min at most) finds it too old
        assert [e["detail"] for e in dev.events("drop")] == ["maximum event age exceeded"]
        gate.touch()


@pytest.mark.parametrize("allow_loops", [False, True])
def test_the_17th_hop_of_a_chain_is_cut_unless_loops_are_allowed(
    allow_loops: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain is read where AWS reads it: the Lineage botocore sends in X-Amzn-Trace-Id
    from inside an invocation. Catches: no loop detection, or RecursiveLoop: Allow ignored."""
    with dev_stack(allow_loops=allow_loops) as dev:
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", FUNCTION)  # as inside an invocation
        for hops in (15, 16):
            monkeypatch.setenv("_X_AMZN_TRACE_ID", f"Root=1-a-b;Lineage=1a2b3c4d:{hops}")
            answer = dev.lambda_.invoke(FunctionName=FUNCTION, InvocationType="Event")
            assert answer["StatusCode"] == 202  # the caller never knows
        drops = [e["hop"] for e in dev.events("drop")]
        assert drops == ([] if allow_loops else [16])
        # a synchronous 17th is stopped too, never run (catches: only Event invokes cut)
        assert dev.stack.wait_idle(30)
        if allow_loops:
            assert dev.lambda_.invoke(FunctionName=FUNCTION)["StatusCode"] == 200
        else:
            with pytest.raises(dev.lambda_.exceptions.RecursiveInvocationException) as stopped:
                dev.lambda_.invoke(FunctionName=FUNCTION)
            status = stopped.value.response["ResponseMetadata"]["HTTPStatusCode"]
            assert status == 400 and dev.kinds().count("invoke_start") == 1  # hop 15 alone


def test_log_type_tail_returns_the_last_4_kb_of_this_invocations_log() -> None:
    """Catches a LogResult left out (or holding another invocation's lines). Source: the
    Invoke API (botocore's model, InvocationResponse.LogResult, header X-Amz-Log-Result):
    "The last 4 KB of the execution log, which is base64-encoded"; the log is what the
    runtime printed, from START to REPORT."""
    with dev_stack("tests.devserver_handlers:prints") as dev:
        lam = dev.lambda_
        plain = lam.invoke(FunctionName=FUNCTION, Payload=json.dumps({"say": "first"}))
        assert "LogResult" not in plain  # LogType None: no log
        tail = lam.invoke(
            FunctionName=FUNCTION, Payload=json.dumps({"say": "second"}), LogType="Tail"
        )
        log = base64.b64decode(tail["LogResult"]).decode()
        lines = log.splitlines()
        assert lines[0].startswith("START RequestId: ") and "second" in lines
        request = lines[0].split()[2]
        assert lines[-1].startswith(f"REPORT RequestId: {request}") and "first" not in log
        many = {"say": "x" * 99, "times": 100}  # 10 KB: only its last 4 KB come back
        big = lam.invoke(FunctionName=FUNCTION, Payload=json.dumps(many), LogType="Tail")
        raw = base64.b64decode(big["LogResult"])
        assert len(raw) == 4096 and raw.decode().splitlines()[-1].startswith("REPORT RequestId")


def test_function_names_and_qualifiers_are_read_as_lambda_reads_them() -> None:
    """Catches a qualifier ignored (an alias that does not exist run, the Qualifier
    parameter never read), another account's function run, and `name:$LATEST` refused.
    FunctionName is a name, a partial or a full ARN, each with an optional qualifier."""
    arn = f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}"
    with dev_stack(aliases=("live",)) as dev:
        lam = dev.lambda_

        def status(**named: Any) -> int:
            return int(lam.invoke(InvocationType="Event", **named)["StatusCode"])

        for name in (FUNCTION, f"{FUNCTION}:$LATEST", f"123456789012:function:{FUNCTION}"):
            assert status(FunctionName=name) == 202
        assert status(FunctionName=f"{arn}:$LATEST") == 202
        assert status(FunctionName=FUNCTION, Qualifier="$LATEST") == 202
        assert status(FunctionName=f"{FUNCTION}:live", Qualifier="live") == 202
        not_found = lam.exceptions.ResourceNotFoundException
        with pytest.raises(not_found, match=f"Function not found: {arn}:no-such-alias$"):
            status(FunctionName=FUNCTION, Qualifier="no-such-alias")
        with pytest.raises(not_found, match=f"Function not found: {arn}:no-such-alias$"):
            status(FunctionName=f"{arn}:no-such-alias")
        with pytest.raises(not_found, match=f"Function not found: {arn}:7$"):
            status(FunctionName=f"{FUNCTION}:7")  # no published version here
        with pytest.raises(lam.exceptions.InvalidParameterValueException, match="derived"):
            status(FunctionName=f"{FUNCTION}:live", Qualifier="$LATEST")
        other = arn.replace("123456789012", "999999999999")
        with pytest.raises(ClientError) as refused:
            status(FunctionName=other)
        assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert dev.kinds().count("kick") == 6  # the refused ones never reached the queue


def test_a_function_name_outside_the_apis_constraints_is_a_validation_error() -> None:
    """Catches a 65-character name (or one with a space) answered 404 ResourceNotFoundException
    where AWS refuses it before any lookup. Source: botocore's model of the Invoke API,
    FunctionName (NamespacedFunctionName: its pattern, length 1-256, and "If you specify
    only the function name, it is limited to 64 characters in length") and Qualifier
    (pattern, 1-128), refused as Lambda refuses a value outside its model: 400
    ValidationException, "1 validation error detected: Value ... at 'functionName' ..."."""
    with dev_stack() as dev:
        lam = dev.lambda_
        refused = {
            "a" * 65: "Member must have length less than or equal to 64",
            "bad name": "Member must satisfy regular expression pattern: (arn:",
            f"arn:aws:lambda:us-east-1:123456789012:function:{'a' * 250}": "Member must have "
            "length less than or equal to 256",
        }
        for name, said in refused.items():
            with pytest.raises(ClientError) as caught:
                lam.invoke(FunctionName=name, InvocationType="DryRun")
            error = caught.value.response["Error"]
            assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
            assert error["Code"] == "ValidationException", error
            assert error["Message"].startswith(
                f"1 validation error detected: Value '{name}' at 'functionName' failed to "
                f"satisfy constraint: {said}"
            ), error
        with pytest.raises(ClientError, match="at 'qualifier' failed") as caught:
            lam.invoke(FunctionName=FUNCTION, Qualifier="no.dots", InvocationType="DryRun")
        assert caught.value.response["Error"]["Code"] == "ValidationException"
    with dev_stack() as dev, pytest.raises(dev.lambda_.exceptions.ResourceNotFoundException):
        dev.lambda_.invoke(FunctionName="a" * 64, InvocationType="DryRun")


def test_injected_duplicates_and_silent_drops() -> None:
    """Catches a stand-in that never delivers twice or loses an event (Lambda documents both)."""
    with dev_stack(duplicate_rate=1.0) as dev:
        dev.lambda_.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b"{}")
        dev.wait(lambda: dev.kinds().count("invoke_end") == 2)
        starts = dev.events("invoke_start")
        assert starts[0]["request_id"] == starts[1]["request_id"]  # one event, twice
    with dev_stack(drop_rate=1.0) as dev:
        answer = dev.lambda_.invoke(FunctionName=FUNCTION, InvocationType="Event")
        assert answer["StatusCode"] == 202 and dev.kinds() == ["kick", "drop"]


def _status_from(app: Any, host: str, host_header: str = "127.0.0.1:3001") -> tuple[int, bytes]:
    """One ASGI request to `app` as if from `host` (a remote client cannot be faked over TCP),
    naming `host_header` in its Host header."""
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/_pgkick/status",
        "raw_path": b"",
        "query_string": b"",
        "headers": [(b"host", host_header.encode())],
        "client": (host, 5000),
        "server": ("x", 1),
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_only_this_machine_is_served_unless_a_host_was_given() -> None:
    """Catches a server that runs the app's code for anyone who can reach the port."""
    with dev_stack() as dev:
        status, body = _status_from(make_app(dev.stack), "192.0.2.10")
        assert status == 403 and b"--host" in body
        assert _status_from(make_app(dev.stack), "127.0.0.1")[0] == 200
        assert _status_from(make_app(dev.stack, allow_remote=True), "192.0.2.10")[0] == 200


def test_a_host_name_the_server_was_not_started_for_is_refused() -> None:
    """Catches (note 59) a server that checked the client's address only: a page elsewhere
    that rebinds its own name to 127.0.0.1 makes this machine's browser the client, and
    read the stack's status or invoked the worker as its own origin."""
    with dev_stack() as dev:
        local = make_app(dev.stack)
        for served in ("127.0.0.1:3001", "localhost:3001", "[::1]:3001"):
            assert _status_from(local, "127.0.0.1", served)[0] == 200, served
        status, body = _status_from(local, "127.0.0.1", "attacker.example:3001")
        assert status == 403 and b"attacker.example" in body and b"--allowed-host" in body
        assert _status_from(local, "127.0.0.1", "192.0.2.10:3001")[0] == 403  # local only
        remote = make_app(dev.stack, allow_remote=True, host_names=["devbox"])
        assert _status_from(remote, "192.0.2.10", "devbox:3001")[0] == 200
        assert _status_from(remote, "192.0.2.10", "192.0.2.1:3001")[0] == 200  # an address
        assert _status_from(remote, "127.0.0.1", "rebound.example")[0] == 403
        assert _status_from(remote, "127.0.0.1", "")[0] == 403  # no Host header: no name


def test_a_stack_on_another_database_is_refused_before_anything_is_written(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches PGKICK_KICKER=local handing its kicks to a `pgkick dev` left running on
    another database (an earlier run's, another project's): its workers would never see
    the job, which would stay queued with no error anywhere."""
    from pgkick import config
    from pgkick.connections.db import dsn_for_database
    from pgkick_dev.devserver.server import ServerThread, make_app
    from pgkick_dev.local import client

    other = dsn_for_database(dsn, "someone_elses")
    with dev_stack() as running:
        for served, refused in ((other, True), (dsn, False)):
            with ServerThread(make_app(running.stack, dsn=served)) as server:
                env = {"PGKICK_DEV_URL": server.url, "PGKICK_DEV_AUTOSTART": "0"}
                monkeypatch.setenv("DATABASE_URL", dsn)
                if refused:
                    with pytest.raises(config.ConfigError, match="someone_elses"):
                        client.connect(env)
                else:
                    assert client.connect(env).url == server.url


def test_a_stack_on_another_schema_is_refused_before_anything_is_written(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches PGKICK_KICKER=local comparing databases only: a stack whose workers look in
    pgkick.jobs took the kicks of a script enqueueing into shopq.jobs of the same database,
    and the job stayed queued with no error anywhere."""
    from pgkick import config
    from pgkick_dev.devserver.server import ServerThread, make_app
    from pgkick_dev.local import client

    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_SCHEMA", "shopq")
    with dev_stack() as running:
        for served, refused in (("pgkick", True), ("shopq", False)):
            with ServerThread(make_app(running.stack, dsn=dsn, schema=served)) as server:
                env = {"PGKICK_DEV_URL": server.url, "PGKICK_DEV_AUTOSTART": "0"}
                if refused:
                    with pytest.raises(config.ConfigError, match=r"schema pgkick.*shopq"):
                        client.connect(env)
                else:
                    assert client.connect(env).url == server.url


def test_a_kick_dropped_past_its_retries_is_healed_through_the_on_failure_destination(
    dsn: str,
) -> None:
    """pgkick's template sends a worker's failed events to FailedKicksQueue, which the worker
    drains (pgkick.aws.failed_kicks). Catches a stand-in that kept them in a list: the kick
    was lost locally, and the failed-kick path never ran before a deploy."""
    from pgkick.kick.lambda_kicker import LambdaKicker
    from pgkick.producer import enqueue as producer
    from tests.store import JobStore

    env = {"DATABASE_URL": dsn, "PGKICK_TASKS": "pgkick_dev.tasks", "PGKICK_WORKER_LINGER_MS": "0"}
    handler = "tests.devserver_handlers:worker_refusing_kicks"
    with dev_stack(handler, env=env, on_failure=True, max_retries=0) as dev:
        kicker = LambdaKicker(FUNCTION, lambda_client=dev.lambda_, scheduler_client=dev.scheduler)
        job = producer.enqueue_and_kick({}, task="noop", queue="healed", dsn=dsn, kicker=kicker)
        assert kicker.flush(10)
        dev.wait(lambda: "drop" in dev.kinds())
        dev.clock.advance(0)  # the SQS event source hands the record over
        dev.wait(lambda: dev.kinds().count("invoke_end") == 2 and dev.stack.idle())
        (dropped,) = dev.stack.functions[FUNCTION].stats.failed_kicks
        assert dropped["event"]["queue"] == "healed"
        healed = dev.events("invoke_start")[1]  # the kick failed; then the record's SQS batch
        assert healed["queue"] is None and healed["hop"] == 0
        # read as Lambda's on-failure record (requestContext, requestPayload), not a letter
        assert any("a lambda kick of queue healed was dropped" in line for line in dev.logs)
        with JobStore.open(dsn) as store:
            assert store.get_many([job])[0]["status"] == "done"


def test_a_throttle_by_the_local_default_cap_names_the_accounts_pool(tmp_path: Path) -> None:
    """With no reservation the local cap stands for the account's unreserved pool, and AWS
    names that limit ConcurrentInvocationLimitExceeded (the stand-in named the reservation
    whatever the cap: an app branching on the Reason took the wrong branch locally)."""
    gate = tmp_path / "open"
    with dev_stack(
        "tests.devserver_handlers:gate",
        env={"PGKICK_TEST_GATE": str(gate)},
        concurrency=1,
        reserved=False,
    ) as dev:
        lam = dev.lambda_
        lam.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b'{"n": 1}')
        dev.wait(lambda: "invoke_start" in dev.kinds())
        with pytest.raises(lam.exceptions.TooManyRequestsException) as throttled:
            lam.invoke(FunctionName=FUNCTION, Payload=b"{}")
        reason = throttled.value.response["Reason"]  # type: ignore[typeddict-item]
        assert reason == "ConcurrentInvocationLimitExceeded"
        gate.touch()
        dev.wait(lambda: "invoke_end" in dev.kinds())
