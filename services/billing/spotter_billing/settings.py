from __future__ import annotations

from pathlib import Path

from spotter_shared.settings import CommonSettings


class BillingSettings(CommonSettings):
    # A hold outlives any model call; past it the hold stops counting (crashed caller).
    spotter_billing_hold_ttl_seconds: float = 600.0
    # Another rate card than the packaged rates.json.
    spotter_billing_rates_file: Path | None = None
