"""The local serverless stack: functions (queue + environments), the scheduler, one timeline.

Why one object: the dev server's HTTP APIs, the in-process stack the demo, the
bench and the tests use (pgkick_dev.local.kicker.LocalKicker), and the thin
client of PGKICK_KICKER=local all drive this, so there is one stand-in. What an
environment says over its pipe lands here: a kick goes to its own function's
queue one hop further down the chain; a wake-up or a rescue becomes a one-time
schedule, named and timed exactly as pgkick.kick.LambdaKicker books it.
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

from pgkick.kick.kickers import booking_minute, kick_event, one_time_schedule, schedule_name
from pgkick_dev.devserver.clock import Clock, RealClock
from pgkick_dev.devserver.environments import Environment, Pool
from pgkick_dev.devserver.queue import AsyncQueue, QueueOptions
from pgkick_dev.devserver.scheduler import Scheduler, SchedulerError, SchedulerFaults
from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN, DeadLetter, DeliveryFailed
from pgkick_dev.devserver.timeline import Timeline

WORKER_HANDLER = "pgkick.aws.worker:handler"
REAPER_HANDLER = "pgkick.aws.reaper:handler"
DEAD_LETTER_BATCH = 10  # the SQS event source mapping's BatchSize on FailedKicksQueue


@dataclass
class FunctionSpec:
    name: str
    handler: str = WORKER_HANDLER
    timeout_ms: int = 300_000  # pgkick's template: WorkerTimeout 300
    concurrency: int = 4
    idle_seconds: float = 300.0  # Lambda keeps an idle environment a few minutes
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
    ) -> None:
        self.clock = clock or RealClock()
        self.timeline = timeline or Timeline(clock=self.clock.now)
        self.lock = threading.Condition()
        self.freeze = freeze
        self.fast_scheduler = fast_scheduler
        self.write_log = write_log
        self.env = {**os.environ, **(env or {})}
        self.functions: dict[str, AsyncQueue] = {}
        self.specs = {spec.name: spec for spec in functions}
        for spec in functions:
            self.functions[spec.name] = AsyncQueue(
                spec.name,
                self._pool_factory(spec),
                options=spec.options,
                clock=self.clock,
                timeline=self.timeline,
                lock=self.lock,
                on_message=self._on_message,
            )
        self.scheduler = Scheduler(
            self._deliver,
            self.clock,
            self.timeline,
            fast=fast_scheduler,
            seed=seed,
            faults=scheduler_faults or SchedulerFaults(),
            on_dead_letter=self._dead_letter,
            on_settled=self._notify,
        )
        self._letters: list[DeadLetter] = []  # waiting for the next SQS batch

    def _pool_factory(self, spec: FunctionSpec) -> Callable[..., Pool]:
        def make(**owner: Any) -> Pool:
            env = {"PGKICK_LOCAL_HANDLER": spec.handler, **self.env, **spec.env}
            return Pool(
                function=spec.name,
                env=env,
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

    def function(self, name: str) -> AsyncQueue | None:
        """The function a name or ARN (…:function:NAME[:qualifier]) names, or None."""
        parts = name.split(":")
        if "function" in parts:
            name = parts[parts.index("function") + 1]
        return self.functions.get(name)

    def idle(self, *, include_schedules: bool = False) -> bool:
        """Under the lock: nothing queued, running or retrying (and, if asked, no one-time
        schedule still to fire: wake-ups and rescues)."""
        if any(not q.idle() for q in self.functions.values()):
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
        else:
            at = booking_minute(when, datetime.fromtimestamp(self.clock.now(), UTC))
            name = name or schedule_name(queue, at)
        body = one_time_schedule(
            name,
            at,
            kick_event(queue, reason),
            function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{function}",
            role_arn="arn:aws:iam::123456789012:role/pgkick-dev-scheduler",
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
            self.scheduler.get(name, None)
            return
        self.write_log(f"pgkick dev: wake-up {name} not booked: Scheduler throttled it ({exc})")

    def cancel(self, name: str) -> None:
        with contextlib.suppress(SchedulerError):  # fired already, or never made
            self.scheduler.delete(name, None)

    def _deliver(self, function: str, event: Any) -> None:
        queue = self.function(function)
        if queue is None:
            raise DeliveryFailed("ResourceNotFoundException", f"Function not found: {function}")
        queue.submit(event, lineage=0)  # the scheduler's invocation starts a new chain

    def _notify(self) -> None:
        with self.lock:
            self.lock.notify_all()

    def _dead_letter(self, letter: DeadLetter) -> None:
        """A schedule's dead letter: to the worker as an SQS event, in batches of up to
        DEAD_LETTER_BATCH, as the template's event source mapping on FailedKicksQueue hands
        them over (the local stack has no SQS; the scheduler keeps every letter too)."""
        with self.lock:
            self._letters.append(letter)
            if len(self._letters) == 1:  # the first of a batch: send what came by then
                self.clock.call_later(0.0, self._send_dead_letters)

    def _send_dead_letters(self) -> None:
        with self.lock:
            letters, self._letters = self._letters, []
        for start in range(0, len(letters), DEAD_LETTER_BATCH):
            batch = letters[start : start + DEAD_LETTER_BATCH]
            target = batch[0].attributes.get("TARGET_ARN", "")
            queue = self.function(target)
            if queue is not None:
                queue.submit({"Records": [letter.sqs_record() for letter in batch]}, lineage=0)

    def _on_message(
        self, owner: AsyncQueue, environment: Environment, message: dict[str, Any]
    ) -> None:
        """Under the lock: what an environment's own kicker asked for."""
        if "kick" in message:  # one hop further down the sender's chain
            sender = environment.busy
            lineage = sender.lineage + 1 if sender is not None else 0
            owner.submit(message["kick"], lineage=lineage)  # the lock is re-entrant
        elif "wake" in message or "rescue" in message:
            booked = message.get("wake") or message["rescue"]
            reason = "rescue" if "rescue" in message else "wake"
            when = datetime.fromisoformat(booked["at"])
            self.book(owner.function, booked["queue"], when, reason, booked.get("name"))
        elif "cancel_rescue" in message:
            self.cancel(message["cancel_rescue"])
