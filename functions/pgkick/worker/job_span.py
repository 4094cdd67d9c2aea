"""A span per job run, a child of the span that enqueued the job (pgkick[otel];
docs/guide/tracing.md).

Why a child of the stored context rather than of the invocation: the question a trace
answers is "what became of this request's work?", and the request is the enqueuer's.
The worker's invocation (the span AWS's OpenTelemetry Lambda layer opens around the
handler, and X-Ray's segment named by `_X_AMZN_TRACE_ID`) is linked instead: one
invocation runs many jobs of many requests, so it cannot be their parent. A job enqueued
without a span runs as a child of the invocation's span, if any.

What the span says follows OpenTelemetry's messaging conventions where they fit (a
consumer span "process <queue>", the queue as destination, the job id as message id),
pgkick's own attributes for the rest: the task, the attempt, the outcome, and when the
job was enqueued, became due and was claimed, on the database's clock (`wait_ms`: from due
to claimed, what the queue cost the job; a dependant is due from its release, when its last
parent finished, not from its enqueue: its parents' wait and run are not its own).
Attributes, not events: an event costs the SDK more than all the attributes together, on
every job. A task that raised records its exception and the span's status is ERROR.

Why OpenTelemetry is only looked up, never imported, until it is loaded: as on the
producer's side (pgkick.producer.trace_context), a process that has not loaded it has no
tracer provider to report to, and the Lambda artifact does not ship it. Without it a job's
run costs one dictionary look-up more.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pgkick import config
from pgkick.store.worker import ClaimedJob, tracing_loaded
from pgkick.tasks.registry import message_of

if TYPE_CHECKING:
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace import Link, Span, SpanContext, Tracer

SYSTEM = "pgkick"


def enabled() -> bool:
    """Whether this process has loaded OpenTelemetry (an app's or the Lambda layer's)."""
    return tracing_loaded()


class JobSpan:
    """What a task's run reports to its span: an exception raised, and the outcome."""

    def __init__(self, span: Span, job: ClaimedJob) -> None:
        self.span, self.job = span, job

    def raised(self, exc: BaseException) -> None:
        """The task raised: the exception as the span's event (type, message, traceback).

        Why not always the SDK's record_exception: it calls `str(exc)` unguarded, and an
        exception whose `__str__` raises would escape run_task and end the whole drain (the
        batch left running until its lease expires), where describe_error fails only the
        job. Such an exception's event is written here, its message as last_error says it."""
        try:
            self.span.record_exception(exc)
        except Exception:
            self.span.add_event("exception", _exception_attributes(exc))

    def ended(self, error: str | None, *, permanent: bool, snoozed: bool) -> None:
        """The run's outcome: succeeded, snoozed, retried or failed (ERROR, with why)."""
        from opentelemetry.trace import Status, StatusCode

        if error is None:
            outcome = "snoozed" if snoozed else "succeeded"
        elif permanent or self.job.attempts >= self.job.max_attempts:
            outcome = "failed"
        else:
            outcome = "retried"
        self.span.set_attribute("pgkick.job.outcome", outcome)
        if error is not None:
            self.span.set_status(Status(StatusCode.ERROR, error))


@contextmanager
def job_span(job: ClaimedJob) -> Iterator[JobSpan]:
    """The job's run as the current span (so the task's own spans, and the jobs it enqueues,
    are its children), ended when the block ends."""
    from opentelemetry.trace import SpanKind

    parent = _stored_parent(job)
    links = invocation_links() if parent is not None else _xray_links()
    with _tracer().start_as_current_span(
        f"process {job.queue}",
        context=parent,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes=_attributes(job),
        record_exception=False,  # run_task catches the task's exceptions: JobSpan.raised
        set_status_on_exception=False,
    ) as span:
        yield JobSpan(span, job)


@functools.cache
def _tracer() -> Tracer:
    """pgkick's tracer, once a process (get_tracer costs more than a span's attributes). Made
    before the app set its provider, it is the API's proxy, which follows the provider set
    later."""
    from opentelemetry import trace

    return trace.get_tracer("pgkick")


@functools.cache
def _propagator() -> TextMapPropagator:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def _stored_parent(job: ClaimedJob) -> Any:
    """The context the job was enqueued under, or None (none stored, or not W3C's form)."""
    if not job.traceparent:
        return None
    from opentelemetry import trace

    carrier = {"traceparent": job.traceparent}
    if job.tracestate:
        carrier["tracestate"] = job.tracestate
    context = _propagator().extract(carrier)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def invocation_links() -> list[Link]:
    """Links to the invocation running the job: the current span (the Lambda layer's, or
    whatever span the caller of the worker opened) and X-Ray's segment, once each."""
    from opentelemetry import trace
    from opentelemetry.trace import Link

    links = []
    current = trace.get_current_span().get_span_context()
    if current.is_valid:
        links.append(Link(current, {"pgkick.link": "invocation"}))
    known = {(link.context.trace_id, link.context.span_id) for link in links}
    xray = [x for x in _xray_links() if (x.context.trace_id, x.context.span_id) not in known]
    return links + xray


def _xray_links() -> list[Link]:
    from opentelemetry.trace import Link

    context = xray_context(config.xray_trace_header())
    return [Link(context, {"pgkick.link": "xray"})] if context is not None else []


@functools.lru_cache(maxsize=8)  # one header an invocation, parsed once for its jobs
def xray_context(header: str | None) -> SpanContext | None:
    """X-Ray's trace header ("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;
    Sampled=1") as a remote span context (the X-Ray trace id is W3C's, less its dashes), or
    None if there is none or it is not of that form (no Parent: nothing to link to)."""
    if not header:
        return None
    from opentelemetry.trace import SpanContext, TraceFlags

    fields = dict(part.split("=", 1) for part in header.split(";") if "=" in part)
    root, parent = fields.get("Root", "").split("-"), fields.get("Parent", "")
    try:
        if len(root) != 3 or root[0] != "1" or len(parent) != 16:
            return None
        trace_id, span_id = int(root[1] + root[2], 16), int(parent, 16)
    except ValueError:
        return None
    if len(root[1] + root[2]) != 32 or not trace_id or not span_id:
        return None
    flags = TraceFlags(TraceFlags.SAMPLED if fields.get("Sampled") == "1" else 0)
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)


def _exception_attributes(exc: BaseException) -> dict[str, str]:
    """The `exception` event's attributes as the SDK names them, without calling str()."""
    kind = type(exc)
    module = kind.__module__
    return {
        "exception.type": f"{module}.{kind.__qualname__}"
        if module and module != "builtins"
        else kind.__qualname__,
        "exception.message": message_of(exc),
        "exception.stacktrace": "".join(traceback.format_exception(exc)),  # str()-safe
        "exception.escaped": "False",
    }


def _attributes(job: ClaimedJob) -> dict[str, str | int | float]:
    attributes: dict[str, str | int | float] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "run",
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.id),
        "pgkick.job.task": job.task,
        "pgkick.job.attempt": job.attempts,
        "pgkick.job.max_attempts": job.max_attempts,
    }
    for name, at in (
        ("enqueued_at", job.enqueued_at),
        ("run_at", job.run_at),
        ("claimed_at", job.claimed_at),
        ("released_at", job.released_at),
    ):
        if at is not None:
            attributes[f"pgkick.job.{name}"] = at.isoformat()
    if job.claimed_at is not None and job.run_at is not None:
        due = max(job.run_at, job.enqueued_at or job.run_at, job.released_at or job.run_at)
        attributes["pgkick.job.wait_ms"] = max(0.0, (job.claimed_at - due).total_seconds() * 1e3)
    return attributes
