"""The W3C trace context of the span that enqueues a job, stored with the job so its run
can be a child of that span (pgkick[otel]; docs/guide/tracing.md).

Why it looks OpenTelemetry up in `sys.modules` instead of importing it: an app that traces
has imported and configured OpenTelemetry before it enqueues anything, and an app that
does not has no span to propagate. So `import pgkick` never imports OpenTelemetry (an
app's start-up pays nothing for an extra it may have installed for something else), and
an enqueue without it pays one dictionary look-up: the producer's hot path
(`enqueue_and_kick`, group commit, enqueue_many's chunks) stays as it was.

Why the span's context is formatted here, not by OpenTelemetry's propagator: the column
holds W3C Trace Context whatever propagators the app configured (X-Ray's, B3), so the
worker can always parse it; and it is the cheapest way to the two strings.
"""

from __future__ import annotations

import sys

# (traceparent, tracestate or None)
TraceContext = tuple[str, str | None]


def current() -> TraceContext | None:
    """The current span's traceparent and tracestate, or None: OpenTelemetry not loaded, or
    no valid span (nothing started one, or only the API's no-op spans)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    state = context.trace_state.to_header() if context.trace_state else None
    parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    return parent, state or None
