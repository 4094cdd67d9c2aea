"""boto3 clients that fail fast, where pgkick calls AWS through boto3.

Why here, low in the layers: the database secret (pgkick.config, outside Lambda), the
kicks and wake-ups (pgkick.kick) and `pgkick schedules sync` (pgkick.aws) all make one, and
all want the same timeouts. Inside a Lambda runtime the worker's own Scheduler and Secrets
Manager calls skip boto3 altogether (pgkick.awsapi.signed_http).
"""

from __future__ import annotations

from typing import Any


def aws_client(service: str, timeout: float) -> Any:
    """A boto3 client whose calls end within about 2 x 2 x `timeout` seconds.

    Why: boto3's defaults (60 s read timeout, retried) let one kick against an
    endpoint that never answers block its caller for 3 minutes, inside a web
    request or a worker's invocation. A kick is a hint: failing fast, logged and
    counted, loses nothing (the job is committed, a wake-up or the reaper runs it).
    boto3 is imported here, on first use: it costs ~0.3 s of CPU that a worker
    which never kicks through Lambda would pay for nothing.
    """
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"total_max_attempts": 2, "mode": "standard"},
    )
    return boto3.client(service, config=config)  # type: ignore[call-overload]
