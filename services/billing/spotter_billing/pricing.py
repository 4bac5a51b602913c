"""The rate card (data in rates.json) and the two prices billing needs: the real cost of a call and
its worst case before the call."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from functools import cached_property
from importlib import resources
from math import lcm
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from spotter_shared.contracts.billing import ModelUsage
from spotter_shared.errors import ErrorCode, SpotterError

# Periods in force remembered per (model, day), at most this many (the card has a few dozen).
IN_FORCE_CACHE_SIZE = 1_000


@dataclass(frozen=True)
class _Exact:
    """A band's rates as integers over one denominator: the same exact prices as Decimal arithmetic,
    several times cheaper (reserve and settle price every model call)."""

    input: int
    output: int
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int
    dearest_prompt: int  # the dearest input-side rate (what a hold bills every prompt token at)
    denominator: int

    @classmethod
    def of(cls, rates: Rates) -> _Exact:
        values = (rates.input, rates.output, rates.cache_read, rates.cache_write_5m, rates.cache_write_1h)
        ratios = [v.as_integer_ratio() for v in values]
        denominator = lcm(*(d for _, d in ratios))
        i, o, r, w5, w1 = (n * (denominator // d) for n, d in ratios)
        return cls(i, o, r, w5, w1, max(i, r, w5, w1), denominator)


class Rates(BaseModel):
    """USD per million tokens, i.e. micro-dollars per token: tokens × rate is micros, exactly."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    cache_read: Decimal = Field(ge=0)
    cache_write_5m: Decimal = Field(ge=0)
    cache_write_1h: Decimal = Field(ge=0)

    # Worked out on first use. A cached_property, not a private attribute: pydantic reads those
    # through __getattr__, a few µs each (the cached value sits in __dict__, so == sees it; nothing
    # compares rate cards).
    @cached_property
    def _exact(self) -> _Exact:
        return _Exact.of(self)


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

    @cached_property
    def _in_force(self) -> dict[tuple[str, date], Period]:
        """The period in force per (model, day), as found so far."""
        return {}

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
        period = self._in_force.get((model, on))
        if period is None:
            period = self._period(model, on)
            if len(self._in_force) >= IN_FORCE_CACHE_SIZE:
                self._in_force.clear()
            self._in_force[(model, on)] = period
        return period.band(prompt_tokens)

    def _period(self, model: str, on: date) -> Period:
        periods = self.models.get(model)
        if periods is None:
            # Never price an unknown model at $0: that would disable the cap for it.
            raise SpotterError(ErrorCode.INVALID_REQUEST, f"model {model!r} is not on the rate card")
        period = next((p for p in periods if p.covers(on)), None)
        if period is None:
            # Fail closed: a call the card cannot price is refused before it is made, never free.
            raise SpotterError(ErrorCode.INVALID_REQUEST, f"model {model!r} has no price on {on.isoformat()}")
        return period

    def price(self, model: str, usage: ModelUsage, on: date) -> int:
        """Cost in micro-dollars: each bucket at its own rate, rounded half up once at the end."""
        r = self.rates(model, on, prompt_tokens(usage))._exact
        total = (
            usage.input_tokens * r.input
            + usage.output_tokens * r.output
            + usage.cache_read_tokens * r.cache_read
            + usage.cache_write_5m_tokens * r.cache_write_5m
            + usage.cache_write_1h_tokens * r.cache_write_1h
        )
        return (2 * total + r.denominator) // (2 * r.denominator)  # total / denominator, half up

    def upper_bound(self, model: str, input_tokens: int, max_output_tokens: int, on: date) -> int:
        """Worst case of a call: every prompt token at the dearest input-side rate (a 1-hour write
        in practice) and all of max_tokens generated. Rounded up, so a hold never undercuts the
        real price."""
        r = self.rates(model, on, input_tokens)._exact
        total = input_tokens * r.dearest_prompt + max_output_tokens * r.output
        return -(-total // r.denominator)  # rounded up


def prompt_tokens(usage: ModelUsage) -> int:
    """What the prompt-size bands are chosen by: every prompt token, cached or not."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_5m_tokens + usage.cache_write_1h_tokens
