"""A stand-in for Lambda's context object, for local invocations and tests.

Why: the worker decides when to stop from `get_remaining_time_in_millis()`, and
Powertools' Logger reads the function name, ARN and request id; a fake with the
same attributes lets the real handler run unchanged outside Lambda.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class FakeLambdaContext:
    function_name: str = "pgkick-worker"
    timeout_ms: int = 60_000
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    clock: Callable[[], float] = time.monotonic
    _started: float = field(init=False)

    def __post_init__(self) -> None:
        self._started = self.clock()

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"local/{self.aws_request_id}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int(self.timeout_ms - (self.clock() - self._started) * 1000))
