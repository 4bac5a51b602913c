"""The rate card (data in rates.json) and the two prices billing needs: the real cost of a call and
its worst case before the call."""

from __future__ import annotations

import json
from datetime import date
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from spotter_shared.contracts.billing import ModelUsage
from spotter_shared.errors import ErrorCode, SpotterError

_ONE = Decimal(1)


class Rates(BaseModel):
    """USD per million tokens, i.e. micro-dollars per token: tokens × rate is micros, exactly."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    cache_read: Decimal = Field(ge=0)
    cache_write_5m: Decimal = Field(ge=0)
    cache_write_1h: Decimal = Field(ge=0)


class Band(Rates):
    max_prompt_tokens: int | None = Field(default=None, ge=0, description="Inclusive; null = unbounded.")


class Period(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    effective_from: date
    effective_to: date | None = None  # inclusive
    source: str | None = None  # the page the prices were checked against
    checked: date | None = None  # when that page was read
    note: str | None = None
    bands: tuple[Band, ...]

    @model_validator(mode="before")
    @classmethod
    def _single_band(cls, data: dict) -> dict:
        # A period without bands states its prices inline: that is one unbounded band.
        if isinstance(data, dict) and "bands" not in data:
            rate_keys = set(Rates.model_fields)
            band = {k: v for k, v in data.items() if k in rate_keys}
            data = {k: v for k, v in data.items() if k not in rate_keys} | {"bands": [band]}
        return data

    @model_validator(mode="after")
    def _check(self) -> Period:
        if self.effective_to is not None and self.effective_to < self.effective_from:
            raise ValueError("effective_to precedes effective_from")
        limits = [b.max_prompt_tokens for b in self.bands]
        if not limits or limits[-1] is not None or None in limits[:-1]:
            raise ValueError("bands need ascending max_prompt_tokens and an unbounded last band")
        if limits[:-1] != sorted(set(limits[:-1])):
            raise ValueError("band limits must be strictly ascending")
        return self

    def covers(self, on: date) -> bool:
        return self.effective_from <= on and (self.effective_to is None or on <= self.effective_to)

    def band(self, prompt_tokens: int) -> Band:
        return next(b for b in self.bands if b.max_prompt_tokens is None or prompt_tokens <= b.max_prompt_tokens)


class RateCard(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    models: dict[str, tuple[Period, ...]]

    @model_validator(mode="after")
    def _no_overlap(self) -> RateCard:
        for model, periods in self.models.items():
            ordered = sorted(periods, key=lambda p: p.effective_from)
            for prev, nxt in zip(ordered, ordered[1:]):
                if prev.effective_to is None or prev.effective_to >= nxt.effective_from:
                    raise ValueError(f"{model}: price periods overlap")
        return self

    @classmethod
    def load(cls, path: str | Path | None = None) -> RateCard:
        """The packaged rates.json, or another card at `path`. Numbers are read as Decimal."""
        text = Path(path).read_text() if path else resources.files(__package__).joinpath("rates.json").read_text()
        return cls.model_validate(json.loads(text, parse_float=Decimal))

    def rates(self, model: str, on: date, prompt_tokens: int) -> Band:
        periods = self.models.get(model)
        if periods is None:
            # Never price an unknown model at $0: that would disable the cap for it.
            raise SpotterError(ErrorCode.INVALID_REQUEST, f"model {model!r} is not on the rate card")
        period = next((p for p in periods if p.covers(on)), None)
        if period is None:
            # Fail closed: a call the card cannot price is refused before it is made, never free.
            raise SpotterError(ErrorCode.INVALID_REQUEST, f"model {model!r} has no price on {on.isoformat()}")
        return period.band(prompt_tokens)

    def price(self, model: str, usage: ModelUsage, on: date) -> int:
        """Cost in micro-dollars: each bucket at its own rate, rounded half up once at the end."""
        r = self.rates(model, on, prompt_tokens(usage))
        total = (
            usage.input_tokens * r.input
            + usage.output_tokens * r.output
            + usage.cache_read_tokens * r.cache_read
            + usage.cache_write_5m_tokens * r.cache_write_5m
            + usage.cache_write_1h_tokens * r.cache_write_1h
        )
        return int(total.quantize(_ONE, rounding=ROUND_HALF_UP))

    def upper_bound(self, model: str, input_tokens: int, max_output_tokens: int, on: date) -> int:
        """Worst case of a call: every prompt token at the dearest input-side rate (a 1-hour write
        in practice) and all of max_tokens generated. Rounded up, so a hold never undercuts the
        real price."""
        r = self.rates(model, on, input_tokens)
        dearest = max(r.input, r.cache_read, r.cache_write_5m, r.cache_write_1h)
        total = input_tokens * dearest + max_output_tokens * r.output
        return int(total.quantize(_ONE, rounding=ROUND_CEILING))


def prompt_tokens(usage: ModelUsage) -> int:
    """What the prompt-size bands are chosen by: every prompt token, cached or not."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_5m_tokens + usage.cache_write_1h_tokens
