"""A what-if, not a service change: the billing service exactly as services/billing/main.py builds it,
except that its four subscribers take up to BENCH_BILLING_MAX_WORKERS messages at once (FastStream's
`max_workers`, as the tool-runner's subscribers do) instead of one at a time. bench_settle.py runs it
with `--what-if-workers N` to show what that one change is worth; the pool size is
SPOTTER_DB_POOL_MAX as for every service.

    BENCH_BILLING_MAX_WORKERS=16 .venv/bin/python bench/billing_whatif.py
"""

from __future__ import annotations

import os

from faststream.nats import NatsRouter

import spotter_billing.handlers as handlers
import spotter_billing.main as billing_main
from spotter_shared import bus
from spotter_shared.contracts.billing import BUDGET_CHECK, RESERVE, SETTLE, USAGE


def concurrent_router(max_workers: int) -> NatsRouter:
    router = NatsRouter()
    for endpoint, handler in ((BUDGET_CHECK, handlers.precheck), (RESERVE, handlers.reserve),
                              (SETTLE, handlers.settle), (USAGE, handlers.usage)):
        bus.subscriber(router, endpoint, max_workers=max_workers)(handler._original_call)
    return router


def run() -> None:
    billing_main.router = concurrent_router(int(os.environ.get("BENCH_BILLING_MAX_WORKERS", "16")))
    billing_main.run()


if __name__ == "__main__":
    run()
