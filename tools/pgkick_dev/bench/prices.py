"""The published prices the bench's cost model applies, each a named field with its source.

Why one module: a price changes on the vendor's page, not in the code that counts
invocations; a reader checks every figure the dollar table rests on in one screen,
with the region and the day it was read. Each field says where it was read, or that
it is assumed (a figure no page at hand stated). The bench had no live web: the pages
are the stored copies the `search` tool returned on READ_ON, and AWS's own pricing
pages were not among them, so the AWS figures come from pages quoting us-east-1.

No free tier is applied: free tiers are per account and shared with everything else
the account runs, so the table prices what pgkick adds, from the first request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

READ_ON = "2026-12-02"
REGION = "us-east-1"
TEMPLATE_MEMORY_MB = 512  # template.yaml's MemorySize, when the template cannot be read


@dataclass(frozen=True)
class Prices:
    region: str = REGION
    read_on: str = READ_ON
    # Lambda, arm64 (template.yaml: Architectures [arm64]); first tier (7.5 billion GB-s).
    # https://cloudchipr.com/blog/aws-lambda-pricing (us-east-1; requests: 0.20 per
    # million on both architectures, also docs/lambdas-md/lambda-13-cost.md of
    # git.mcrn.ar/mariano/lambda_local_runner). Billed per 1 ms, init included (AWS bills
    # the INIT phase of on-demand functions since 2025-08-01: assumed from AWS's notice).
    lambda_per_million_requests: float = 0.20
    lambda_per_gb_second: float = 0.0000133334
    # EventBridge Scheduler: billed per scheduled invocation (a fire); creating and
    # deleting schedules is not billed (https://awsnegotiations.com/eventbridge-scheduler-cost,
    # which gives the 14 million a month free tier but not the rate).
    # ASSUMED: 1.00 per million invocations (AWS's rate as remembered, not read here).
    scheduler_per_million_invocations: float = 1.00
    # Secrets Manager (https://hivebook.wiki/wiki/aws-secrets-manager-rotated-secrets-dynamic-db-credentials-kms):
    # 0.40 per secret a month, 0.05 per 10,000 API calls.
    secrets_per_10k_calls: float = 0.05
    secret_per_month: float = 0.40
    # SQS standard queue: 0.40 per million requests, an empty receive included
    # (https://aws.amazon.com/premiumsupport/knowledge-center/sqs-high-charges/: Lambda's
    # event source mapping long-polls even an unused queue; the rate:
    # https://www.factualminds.com/blog/amazon-sqs-pricing-64kb-rule-fifo-vs-standard/).
    sqs_per_million_requests: float = 0.40
    # ASSUMED: the mapping's idle pollers, 5 long polls of 20 s each at a time (AWS's
    # documented starting number of pollers, as remembered, not read here).
    sqs_idle_pollers: int = 5
    sqs_long_poll_seconds: float = 20.0
    # Fargate, Linux/ARM, per second (https://www.vantage.sh/blog/fargate-pricing, us-east-1):
    # 0.03238 per vCPU-hour, 0.00356 per GB-hour; the smallest task 0.25 vCPU, 0.5 GB.
    fargate_per_vcpu_hour: float = 0.03238
    fargate_per_gb_hour: float = 0.00356
    fargate_vcpu: float = 0.25
    fargate_gb: float = 0.5
    # Neon, Launch plan (https://neon.com/docs/introduction/plans): 0.14 per CU-hour, scale
    # to zero after 5 minutes. Neon's FAQ pages quote 0.106 (a later cut?): the plans
    # page's figure is used. The compute size, 0.25 CU, is Neon's smallest
    # (https://neon.com/faqs/managed-postgres-services-pay-active-compute).
    neon_per_cu_hour: float = 0.14
    neon_compute_units: float = 0.25
    neon_suspend_seconds: float = 300.0

    def sources(self) -> list[str]:
        """bench.md's footnote: where each figure was read, and which ones are assumed."""
        return [
            f"prices of {self.region}, read on {self.read_on} from stored copies of public "
            "pages (no free tier applied)",
            f"Lambda arm64: ${self.lambda_per_million_requests}/million requests, "
            f"${self.lambda_per_gb_second}/GB-s, 1 ms granularity, init billed (cloudchipr.com "
            "blog aws-lambda-pricing)",
            f"Scheduler: ${self.scheduler_per_million_invocations}/million invocations "
            "(ASSUMED; only the free tier was read, awsnegotiations.com)",
            f"Secrets Manager: ${self.secret_per_month}/secret-month, "
            f"${self.secrets_per_10k_calls}/10,000 calls (hivebook.wiki)",
            f"SQS: ${self.sqs_per_million_requests}/million requests (AWS knowledge center "
            f"sqs-high-charges; factualminds.com); idle mapping: {self.sqs_idle_pollers} "
            f"pollers x one {self.sqs_long_poll_seconds:.0f} s long poll (ASSUMED)",
            f"Fargate Linux/ARM: ${self.fargate_per_vcpu_hour}/vCPU-h, "
            f"${self.fargate_per_gb_hour}/GB-h, task {self.fargate_vcpu} vCPU + "
            f"{self.fargate_gb} GB (vantage.sh blog fargate-pricing)",
            f"Neon Launch: ${self.neon_per_cu_hour}/CU-hour at {self.neon_compute_units} CU, "
            f"suspends after {self.neon_suspend_seconds / 60:.0f} min idle "
            "(neon.com/docs/introduction/plans; its FAQ pages say $0.106)",
        ]


def template_memory_mb(root: Path | None) -> tuple[int, str]:
    """The worker's MemorySize in template.yaml (the Globals' Function), and where it came
    from: the template read, or the constant when the bench runs outside a checkout."""
    template = root / "template.yaml" if root else None
    if template is None or not template.is_file():
        return TEMPLATE_MEMORY_MB, "assumed (no template.yaml here)"
    found = re.search(r"^\s+MemorySize:\s*(\d+)\s*$", template.read_text(), re.MULTILINE)
    if found is None:
        return TEMPLATE_MEMORY_MB, "assumed (no MemorySize in template.yaml)"
    return int(found.group(1)), "template.yaml"
