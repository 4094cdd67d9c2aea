"""The local serverless stack: functions (queue + environments), the scheduler, one timeline.

Why one object: the dev server's HTTP APIs, the in-process stack the demo, the
bench and the tests use (pgkick_dev.local.kicker.LocalKicker), and the thin
client of PGKICK_KICKER=local all drive this, so there is one stand-in. Each
environment runs Lambda's runtime client behind AWS's emulator
(pgkick_dev.devserver.environments), and the worker inside calls this stack back
as it calls AWS: signed HTTP requests (pgkick.awsapi) to the Lambda and Scheduler APIs at
`endpoint`
(`runtime_env` says how). Its kicks reach the Invoke API under a path naming the
environment (`/_env/<id>/...`), which is how the stack counts the chain's hops:
the emulator does not pass Lambda's trace header (and its Lineage) through.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pgkick import config
from pgkick.kick.kickers import (
    booking_minute,
    first_minute,
    kick_event,
    one_time_schedule,
    schedule_name,
)
from pgkick_dev.devserver import function_names
from pgkick_dev.devserver.clock import Clock, RealClock
from pgkick_dev.devserver.dead_letters import DeadLetters
from pgkick_dev.devserver.environments import Pool
from pgkick_dev.devserver.invocations import QueueOptions
from pgkick_dev.devserver.queue import AsyncQueue
from pgkick_dev.devserver.scheduler import Scheduler
from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN, DeliveryFailed
from pgkick_dev.devserver.schedules import SchedulerError, SchedulerFaults
from pgkick_dev.devserver.timeline import Timeline

WORKER_HANDLER = "pgkick.aws.worker:handler"
REAPER_HANDLER = "pgkick.aws.reaper:handler"


@dataclass
class FunctionSpec:
    name: str
    handler: str = WORKER_HANDLER
    timeout_ms: int = 300_000  # pgkick's template: WorkerTimeout 300
    concurrency: int = 4
    # the cap is a reservation (ReservedConcurrentExecutions, --concurrency): a throttle's
    # Reason names it; False: the local default standing for the account's unreserved pool
    reserved: bool = True
    idle_seconds: float = 300.0  # Lambda keeps an idle environment a few minutes
    memory_mb: int = 512  # MemorySize: what the context reports, and the runtime's limit
    aliases: tuple[str, ...] = ()  # the template's AutoPublishAlias: a qualifier it answers to
    on_failure: str | None = None  # the on-failure destination queue's ARN (OnFailure)
    drains: str | None = None  # the queue its SQS event source reads (FailedKicksQueue)
    # pgkick's template: that event source's BatchSize (records per invocation at most),
    # its queue's VisibilityTimeout and MessageRetentionPeriod (seconds)
    drain_batch: int = 5
    drain_visibility: int = 900
    drain_retention: int = 1_209_600
    options: QueueOptions = field(default_factory=QueueOptions)
    env: Mapping[str, str] = field(default_factory=dict)


def stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Stack:
    def __init__(
        self,
        functions: list[FunctionSpec],
        *,
        env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        timeline: Timeline | None = None,
        write_log: Callable[[str], None] = stderr_line,
        freeze: bool = True,
        fast_scheduler: bool = False,
        seed: int | None = None,
        scheduler_faults: SchedulerFaults | None = None,
        endpoint: str | None = None,
        schedule_group: str = "default",
        schedule_groups: tuple[str, ...] = (),
    ) -> None:
        """endpoint: the URL serving this stack's Lambda and Scheduler APIs, which the
        environments call back (set it before the first invocation, once it is known).
        schedule_groups: the template's schedule groups (besides "default"), the only ones
        Scheduler knows; schedule_group: the one the worker books its wake-ups in (the
        template's PGKICK_SCHEDULE_GROUP)."""
        self.schedule_group = schedule_group
        self.endpoint = endpoint
        self.clock = clock or RealClock()
        self.timeline = timeline or Timeline(clock=self.clock.now)
        self.lock = threading.Condition()
        self.freeze = freeze
        self.fast_scheduler = fast_scheduler
        self.write_log = write_log
        self.env = {**os.environ, **(env or {})}
        self.functions: dict[str, AsyncQueue] = {}
        self.specs = {spec.name: spec for spec in functions}
        self.dead_letters = DeadLetters(
            self.specs,
            self.function,
            clock=self.clock,
            timeline=self.timeline,
            lock=self.lock,
            write_log=write_log,
        )
        for spec in functions:
            self.functions[spec.name] = AsyncQueue(
                spec.name,
                self._pool_factory(spec),
                options=spec.options,
                clock=self.clock,
                timeline=self.timeline,
                lock=self.lock,
                on_failure=self.dead_letters.on_failure_for(spec),
            )
        self.scheduler = Scheduler(
            self._deliver,
            self.clock,
            self.timeline,
            fast=fast_scheduler,
            seed=seed,
            faults=scheduler_faults or SchedulerFaults(),
            on_dead_letter=self.dead_letters.route,
            on_settled=self._notify,
            groups=frozenset({"default", schedule_group, *schedule_groups}),
        )

    def _pool_factory(self, spec: FunctionSpec) -> Callable[..., Pool]:
        def make(**owner: Any) -> Pool:
            return Pool(
                function=spec.name,
                handler=spec.handler,
                env={**self.env, **spec.env},
                runtime_env=lambda environment: self.runtime_env(spec.name, environment),
                memory_mb=spec.memory_mb,
                write_log=lambda line: self.write_log(line),
                concurrency=spec.concurrency,
                timeout_ms=spec.timeout_ms,
                idle_seconds=spec.idle_seconds,
                clock=self.clock,
                timeline=self.timeline,
                freeze=self.freeze,
                **owner,
            )

        return make

    def runtime_env(self, function: str, environment: str) -> dict[str, str]:
        """What the worker in an environment needs to call this stack as it calls AWS:
        boto3's endpoint variables, dummy credentials, the Lambda kicker's settings. The
        schedules' fast kindness needs wake-ups booked at their second, which LambdaKicker
        cannot (it books the minute): then the local kicker's in-environment form
        (pgkick_dev.local.inside) books them, through the same Scheduler API."""
        if self.endpoint is None:
            raise RuntimeError("the stack's endpoint is not set: serve its API first")
        return {
            "PGKICK_KICKER": "local" if self.fast_scheduler else "lambda",
            "PGKICK_DEV_WAKE_AT_SECOND": "1" if self.fast_scheduler else "",
            "PGKICK_WORKER_FUNCTION": function,
            "PGKICK_WORKER_ARN": f"arn:aws:lambda:us-east-1:123456789012:function:{function}",
            "PGKICK_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/pgkick-dev-scheduler",
            # as the template sets it: undeliverable wake-ups come back as SQS events
            "PGKICK_SCHEDULE_DLQ_ARN": LOCAL_DLQ_ARN,
            "PGKICK_SCHEDULE_GROUP": self.schedule_group,  # the template's, as deployed
            "PGKICK_SCHEMA": config.app_settings().schema,  # a CLI's --schema included
            "AWS_ENDPOINT_URL_LAMBDA": f"{self.endpoint}/_env/{environment}",
            "AWS_ENDPOINT_URL_SCHEDULER": self.endpoint,
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "pgkick-dev",  # never the developer's own credentials
            "AWS_SECRET_ACCESS_KEY": "pgkick-dev",
        }

    def sender_lineage(self, environment: str) -> int | None:
        """Under the lock: the chain position of a kick sent by `environment`'s running
        invocation (one hop further), or None if it runs none now."""
        for queue in self.functions.values():
            found = queue.pool.find(environment)
            if found is not None and found.busy is not None:
                return int(found.busy.lineage) + 1
        return None

    def resolve(self, function_name: str, qualifier: str | None = None) -> AsyncQueue:
        """The function the Invoke API's FunctionName (a name, a partial or full ARN, each
        with an optional :qualifier) and Qualifier name; NameRefused as Lambda refuses it
        (pgkick_dev.devserver.function_names)."""
        named = function_names.parse(function_name, qualifier)
        spec = self.specs.get(named.name)
        function_names.check(named, spec is not None, spec.aliases if spec else ())
        return self.functions[named.name]

    def throttle_reason(self, queue: AsyncQueue) -> str:
        """The Reason of a 429 for this function, as Lambda names the limit it hit: its
        reserved concurrency, or the account's unreserved pool (the local default cap)."""
        reserved = next(s.reserved for s in self.specs.values() if self.functions[s.name] is queue)
        return (
            "ReservedFunctionConcurrentInvocationLimitExceeded"
            if reserved
            else "ConcurrentInvocationLimitExceeded"
        )

    def function(self, name: str) -> AsyncQueue | None:
        """The function a name or ARN names, or None where Lambda would refuse it."""
        try:
            return self.resolve(name)
        except function_names.NameRefused:
            return None

    def idle(self, *, include_schedules: bool = False) -> bool:
        """Under the lock: nothing queued, running or retrying (and, if asked, no one-time
        schedule still to fire: wake-ups and rescues). A failed kick waiting out its
        visibility timeout on the drained queue does not count: it is held, as on AWS."""
        if any(not q.idle() for q in self.functions.values()):
            return False
        if any(source.waiting() for source in self.dead_letters.sources.values()):
            return False
        return not include_schedules or not (self.one_time_schedules() or self.scheduler.retrying)

    def one_time_schedules(self) -> list[str]:
        return [
            s.name
            for s in self.scheduler.list()
            if s.due is not None and str(s.body["ScheduleExpression"]).startswith("at(")
        ]

    def wait_idle(self, timeout: float, *, include_schedules: bool = False) -> bool:
        with self.lock:
            return self.lock.wait_for(
                lambda: self.idle(include_schedules=include_schedules), timeout
            )

    def reload(self) -> int:
        with self.lock:
            return sum(q.pool.reload() for q in self.functions.values())

    def close(self) -> None:
        self.scheduler.close()
        self.dead_letters.close()
        for queue in self.functions.values():
            queue.close()

    # -- wake-ups and rescues, booked as pgkick.kick.LambdaKicker books them ------------
    def book(
        self, function: str, queue: str, when: datetime, reason: str, name: str | None
    ) -> None:
        """A one-time schedule kicking `queue`; booked already is fine (as ConflictException)."""
        if self.fast_scheduler:  # kindness: at the second, so each its own name
            at = datetime.fromtimestamp(math.ceil(when.timestamp()), UTC)
            name = name or f"{schedule_name(queue, at)}{at:%S}"
        else:  # as LambdaKicker: a wake-up a margin ahead, a rescue a minute and a margin
            now = datetime.fromtimestamp(self.clock.now(), UTC)
            at = booking_minute(when, now) if reason == "rescue" else first_minute(when, now)
            name = name or schedule_name(queue, at)
        body = one_time_schedule(
            name,
            at,
            kick_event(queue, reason),
            function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{function}",
            role_arn="arn:aws:iam::123456789012:role/pgkick-dev-scheduler",
            group=self.schedule_group,
            dead_letter_arn=LOCAL_DLQ_ARN,
        )
        del body["Name"]
        try:
            self.scheduler.create(name, body)
        except SchedulerError as exc:
            if exc.code == "ThrottlingException":  # what LambdaKicker retries, then forgets
                self._throttled(name, exc)
            elif exc.code != "ConflictException":
                raise

    def _throttled(self, name: str, exc: SchedulerError) -> None:
        """A booking Scheduler throttled (10 calls a second on one schedule, or injected).
        Past 10 calls in a second the schedule exists (the first made it): nothing is lost.
        Otherwise the wake-up is lost, as a booking whose retries ran out on AWS; the next
        sweep of a leaving worker (pgkick.worker.healing) books it again."""
        with contextlib.suppress(SchedulerError):
            self.scheduler.get(name, self.schedule_group)
            return
        self.write_log(f"pgkick dev: wake-up {name} not booked: Scheduler throttled it ({exc})")

    def cancel(self, name: str) -> None:
        with contextlib.suppress(SchedulerError):  # fired already, or never made
            self.scheduler.delete(name, self.schedule_group)

    def _deliver(self, function: str, event: Any) -> None:
        queue = self.function(function)
        if queue is None:
            raise DeliveryFailed("ResourceNotFoundException", f"Function not found: {function}")
        queue.submit(event, lineage=0)  # the scheduler's invocation starts a new chain

    def _notify(self) -> None:
        with self.lock:
            self.lock.notify_all()
