"""The worker's process of tests/test_tracing.py: the real worker handler, traced as AWS's
OpenTelemetry Lambda layer traces it (the SDK configured before the handler loads, a span
open around each invocation), its spans written as JSON lines to the file in argv[1].

Run as `python -m tests.otel_worker_process SPANS_FILE` with DATABASE_URL and
PGKICK_KICKER=none set; `_X_AMZN_TRACE_ID`, if set, is the invocation's X-Ray header.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind


class JsonLinesExporter(SpanExporter):
    """Each finished span as one line of the SDK's own JSON."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open("a") as out:
            for span in spans:
                out.write(json.dumps(json.loads(span.to_json())) + "\n")
        return SpanExportResult.SUCCESS


def main(path: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    trace.set_tracer_provider(provider)

    import pgkick.aws.worker as app
    from pgkick_dev.local.context import FakeLambdaContext

    layer = trace.get_tracer("lambda-layer-stand-in")
    with layer.start_as_current_span("pgkick-worker invocation", kind=SpanKind.SERVER):
        result = app.handler({"queue": "default", "reason": "enqueue"}, FakeLambdaContext())
    provider.shutdown()
    print("handler answered", json.dumps(result))  # after Powertools' own lines


if __name__ == "__main__":
    main(Path(sys.argv[1]))
