"""Durable steps: `job.step("name", fn, *args)` runs `fn` once per job, `job.sleep(s)` waits
without holding anything.

Why: a job on Lambda dies at 15 minutes, and a retry used to run the whole task again,
side effects included. A step's JSON result is stored with its job as soon as it
finishes (pgkick.store.steps, fenced by the attempt), so a retry or a continuation
replays the finished steps from storage and runs only what is left. The task's code runs
from the top every time; a step is its unit of work, named by the task: the same name
with other arguments is refused (the code changed under a running job, or two steps
share a name), as is a result that is not JSON, before anything is written.

Time: before a step that is not stored yet, the book compares the invocation's time left
(the Lambda context's clock, handed in by the worker) less the worker's reserve with the
longest step this job has run so far (stored with each step, measured on that same
clock). When it does not fit, `Continuation` ends the run: the worker re-queues the job
without using an attempt and hands the queue to a fresh invocation (pgkick.worker.loop).
A job whose last continuation came before any step ran (it was claimed late: "stalled")
runs its next step whatever the estimate, so a step longer than an invocation is tried,
never continued for ever; but only on a claim with at least the time left that stall had
(stored with the continuation, migration 0037): a claim as late again, or later, continues
again instead of overrunning its invocation (a guard that knew only "stalled" ran a
10-minute step with 3 minutes left after a stall at 5).

`job.sleep(seconds)` is a step too: its end is stored, then the job snoozes (back in the
queue until then, a wake-up booked, no attempt used); replayed, it returns at once, or
snoozes again for what is left if the job ran early.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from pgkick.errors import (
    MAX_SNOOZE_SECONDS,
    Continuation,
    InvalidArgument,
    Snooze,
    StepInputError,
    StepRefused,
)
from pgkick.store.steps import StepStore, StoredStep, StoredSteps
from pgkick.tasks.results import MAX_RESULT_BYTES
from pgkick.validation import check_name, payload_json

SLEEP_PREFIX = "sleep:"  # a sleep's stored name: sleep:<its name>, or sleep:<n> the n-th one
# How much less time left than its stall had a claim may have and still count as no later:
# fresh invocations of one function claim within milliseconds of each other (a step longer
# than an invocation must not be continued for ever by that jitter), a late claim minutes.
STALL_SLACK_MS = 1000


class Steps:
    """One run of one job's steps. With no store (a context made by hand, pgkick.testing's
    inline mode) the same checks apply and results are kept for the run only."""

    def __init__(
        self,
        store: StepStore | None = None,
        job_id: int = 0,
        attempt: int = 0,
        *,
        remaining_ms: Callable[[], int] | None = None,
        reserve_ms: float = 0.0,
    ) -> None:
        self._store = store
        self._job_id = job_id
        self._attempt = attempt
        self._remaining_ms = remaining_ms
        self._reserve_ms = reserve_ms
        self._stored: StoredSteps | None = None  # read on the first step: one statement
        self._ran = 0  # steps run (not replayed) in this invocation
        self._sleeps = 0  # sleeps met in this run, to name the unnamed ones
        self._open: set[str] = set()  # steps whose fn is running now (a step in a step)

    @property
    def running(self) -> bool:
        """Inside a step's fn (JobContext.spawn refuses to run there)."""
        return bool(self._open)

    def run(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """`fn(*args)`'s result: the stored one if this step finished before (in this job,
        any attempt or invocation), else run now and stored before it is returned."""
        _check_name("step", name)
        if name in self._open:
            raise StepInputError(
                f"step {name!r} runs a step of its own name inside it: the inner one stores "
                "the name first, and the outer one could store nothing; give each step a "
                "name of its own; nothing was stored"
            )
        if name.startswith(SLEEP_PREFIX):
            raise StepInputError(f"step {name!r}: names starting {SLEEP_PREFIX!r} are sleeps'")
        if not callable(fn):
            raise StepInputError(f"step {name!r}: {type(fn).__name__} is not callable")
        args_hash = _hash(name, args)
        done = self._replay(name, args_hash)
        if done is not None:
            return done.result
        self._check_time(name)
        before = self._now_ms()
        self._open.add(name)
        try:
            value = fn(*args)
        finally:
            self._open.discard(name)
        try:
            text = payload_json(value, MAX_RESULT_BYTES) if value is not None else None
        except (TypeError, ValueError) as exc:
            message = str(exc).removeprefix("payload: ")
            raise StepInputError(
                f"step {name!r}: its result is not storable JSON ({message}); return JSON "
                f"values (dict, list, str, int, float, bool, None) of at most "
                f"{MAX_RESULT_BYTES} bytes; nothing was stored"
            ) from None
        duration_ms = max(0, int(before - self._now_ms()))
        # As a replay returns it: jsonb's own form, read back from the row just written
        # (jsonb sorts an object's keys and keeps 2.5e16 as the integer it equals, so
        # Python's own JSON of it came back other on a replay: a later step taking it as an
        # argument was refused as changed). With no store, decoded from the text.
        stored = self._write(name, args_hash, text, duration_ms, None)
        result = stored if self._store is not None or text is None else json.loads(text)
        if self._ran == 0 and self._store is not None and self._loaded().stalled:
            # the one step the stall guard let run: a later late claim (after a sleep, a
            # snooze, a retry) must continue again, not overrun its invocation
            self._store.clear_stall(self._job_id, self._attempt)
        self._ran += 1
        self._loaded().steps[name] = StoredStep(args_hash, result, duration_ms, None)
        return result

    def sleep(self, seconds: float, name: str | None = None) -> None:
        """End this run and come back after `seconds` (a snooze, booked once: replayed, the
        sleep is over, or snoozes for what is left)."""
        if self._open:
            # A replay returns a stored step without running its fn, so it never meets this
            # sleep: the next unnamed sleep would take its number and replay as over.
            raise StepInputError(
                f"sleep: not inside job.step (in step {sorted(self._open)[0]!r}): a replay "
                "returns the step's stored result without running it, so the sleep would not "
                "be met again and a later sleep would be skipped as over; sleep between "
                "steps; nothing was stored"
            )
        self._sleeps += 1
        if name is not None:
            _check_name("sleep", name)
            if name.isascii() and name.isdigit():  # the unnamed sleeps' keys: sleep:1, ...
                raise StepInputError(
                    f"sleep: the name {name!r} is the key of the job's unnamed sleep number "
                    f"{name} (a replay would take one for the other): give it a name with a "
                    "letter in it; nothing was stored"
                )
        key = SLEEP_PREFIX + (name if name is not None else str(self._sleeps))
        # Its seconds are neither compared with a replay's nor checked again: the end stored
        # is what counts, and a sleep until a deadline (`deadline - time.time()`) asks for
        # other seconds each run, none at all once the deadline has passed.
        done = self._loaded().steps.get(key)
        if done is not None:
            if done.sleep_left:
                raise Snooze(done.sleep_left)  # run before its time (an operator's retry)
            return
        seconds = _sleep_seconds(seconds)  # refuses bad seconds before anything is written
        args_hash = _hash(key, (seconds,))
        self._write(key, args_hash, None, 0, seconds)
        self._loaded().steps[key] = StoredStep(args_hash, None, 0, seconds)
        if seconds > 0:
            raise Snooze(seconds)

    def _replay(self, name: str, args_hash: str) -> StoredStep | None:
        done = self._loaded().steps.get(name)
        if done is not None and done.args_hash != args_hash:
            raise StepInputError(
                f"step {name!r} already finished in this job with other arguments: give each "
                "step a name of its own (e.g. with the item's id in it), or keep a running "
                "job's arguments unchanged; nothing was run or stored"
            )
        return done

    def _check_time(self, name: str) -> None:
        """Raise Continuation when the time left, less the reserve, is shorter than the
        longest step this job has run (see the module's docstring)."""
        if self._remaining_ms is None or self._store is None:
            return
        stored = self._loaded()
        estimate = max(
            (s.duration_ms for s in stored.steps.values() if s.sleep_left is None), default=0
        )
        left = self._remaining_ms() - self._reserve_ms
        if left >= estimate:
            return
        # Continued last time before any step ran: run this one whatever it takes, unless
        # this claim is later than that one was (no better: a fresh invocation is).
        no_later = stored.stalled_left_ms is None or left >= stored.stalled_left_ms - STALL_SLACK_MS
        if self._ran == 0 and stored.stalled and no_later:
            return
        raise Continuation(stalled=self._ran == 0, left_ms=int(left))

    def _now_ms(self) -> float:
        """The invocation's clock: time left, counting down (0 with none: no estimate)."""
        return float(self._remaining_ms()) if self._remaining_ms is not None else 0.0

    def _loaded(self) -> StoredSteps:
        if self._stored is None:
            store = self._store
            self._stored = StoredSteps({}, False) if store is None else store.steps_of(self._job_id)
        return self._stored

    def _write(
        self, name: str, args_hash: str, text: str | None, duration_ms: int, sleep: float | None
    ) -> Any:
        """Store the step; its result as stored (jsonb's form). Raises StepRefused when
        this attempt no longer holds the job."""
        if self._store is None:
            return None
        written, stored = self._store.record_step(
            self._job_id,
            self._attempt,
            name,
            args_hash=args_hash,
            result=text,
            duration_ms=duration_ms,
            sleep=sleep,
        )
        if not written:
            raise StepRefused(
                f"step {name!r} of job {self._job_id}: not stored, attempt {self._attempt} "
                "no longer holds the job (its lease was taken over); stopping here"
            )
        return stored


def _sleep_seconds(seconds: object) -> float:
    """A sleep's seconds; none left (0 or fewer: a deadline that passed while the job waited
    in the queue) is a sleep already over, stored so. Refused for good (a retry would run
    the same code into the same error): not a number, NaN, or more than a snooze's cap."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not seconds <= MAX_SNOOZE_SECONDS  # NaN fails this too
    ):
        raise StepInputError(
            f"sleep: seconds must be a number of seconds of at most {MAX_SNOOZE_SECONDS} "
            f"(30 days), got {seconds!r}; nothing was stored"
        )
    return max(float(seconds), 0.0)


def _check_name(what: str, name: str) -> None:
    """check_name's rule, its refusal made permanent: a retry runs the same name again."""
    try:
        check_name(what, name)
    except InvalidArgument as exc:
        raise StepInputError(f"{exc}; nothing was stored") from None


def _hash(name: str, args: tuple[Any, ...]) -> str:
    """sha256 of the arguments as JSON, keys sorted: what tells a replay from a name reused."""
    try:
        text = json.dumps(list(args), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StepInputError(
            f"step {name!r}: its arguments must be JSON values ({exc}): they are compared "
            "with a replay's; pass ids and plain values, not objects; nothing was run"
        ) from None
    return hashlib.sha256(text.encode()).hexdigest()
