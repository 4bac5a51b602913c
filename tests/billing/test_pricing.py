"""The rate card prices each usage bucket at its own rate, by date and prompt-size band."""

from __future__ import annotations

import json
import random
from datetime import date
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

import pytest

from spotter_billing.pricing import RateCard, prompt_tokens
from spotter_shared.contracts.billing import ModelUsage
from spotter_shared.errors import ErrorCode, SpotterError

ON = date(2026, 11, 22)
MTOK = 1_000_000


def price(rates: RateCard, model: str, on: date = ON, **usage: int) -> int:
    return rates.price(model, ModelUsage(**usage), on)


@pytest.mark.parametrize(
    ("bucket", "micros_per_mtok"),
    [
        ("input_tokens", 2_000_000),
        ("output_tokens", 10_000_000),
        ("cache_read_tokens", 100_000),  # 0.05 × input since 2026-10-07
        ("cache_write_5m_tokens", 2_500_000),  # 1.25 × input
        ("cache_write_1h_tokens", 4_000_000),  # 2 × input
    ],
)
def test_sonnet_5_5_prices_each_bucket_at_its_own_rate(rates: RateCard, bucket: str, micros_per_mtok: int) -> None:
    assert price(rates, "claude-sonnet-5-5", **{bucket: MTOK}) == micros_per_mtok


def test_cache_write_ttls_are_priced_apart(rates: RateCard) -> None:
    five_min = price(rates, "claude-sonnet-5-5", cache_write_5m_tokens=10_000)
    one_hour = price(rates, "claude-sonnet-5-5", cache_write_1h_tokens=10_000)
    plain = price(rates, "claude-sonnet-5-5", input_tokens=10_000)
    assert (plain, five_min, one_hour) == (20_000, 25_000, 40_000)


def test_mixed_call_is_exact_micros(rates: RateCard) -> None:
    usage = dict(input_tokens=1234, output_tokens=567, cache_read_tokens=8901, cache_write_5m_tokens=2345, cache_write_1h_tokens=3456)
    # 1234×2 + 567×10 + 8901×0.2 + 2345×2.5 + 3456×4 = 2468 + 5670 + 1780.2 + 5862.5 + 13824
    assert price(rates, "claude-sonnet-5-5", date(2026, 10, 6), **usage) == 29_605  # 29604.7 rounded once, at the end
    # The same call a day later: reads at 0.1 → 890.1, total 28714.6
    assert price(rates, "claude-sonnet-5-5", date(2026, 10, 7), **usage) == 28_715


def test_rounding_is_half_up_once(rates: RateCard) -> None:
    # Haiku 5.5 reads: 0.01 micros per token. 50 reads = 0.5 → 1; 49 = 0.49 → 0.
    assert price(rates, "claude-haiku-5-5", cache_read_tokens=50) == 1
    assert price(rates, "claude-haiku-5-5", cache_read_tokens=49) == 0
    # Per-bucket rounding would give 0 + 0; summing first gives 0.98 → 1.
    assert price(rates, "claude-haiku-5-5", cache_read_tokens=49, cache_write_5m_tokens=4) == 1


def test_haiku_5_5_band_switches_above_100k_prompt_tokens(rates: RateCard) -> None:
    at_limit = price(rates, "claude-haiku-5-5", input_tokens=100_000, output_tokens=1_000)
    assert at_limit == 10_500  # 100_000 × 0.10 + 1_000 × 0.50
    above = price(rates, "claude-haiku-5-5", input_tokens=100_001, output_tokens=1_000)
    assert above == 52_501  # 100_001 × 0.50 + 1_000 × 2.50 = 52_500.5, half up


def test_haiku_5_5_band_counts_cached_prompt_tokens(rates: RateCard) -> None:
    # 10k uncached + 95k read = 105k prompt tokens: the whole call moves to the upper band.
    cost = price(rates, "claude-haiku-5-5", input_tokens=10_000, cache_read_tokens=95_000, cache_write_1h_tokens=0)
    assert cost == 9_750  # 10_000 × 0.50 + 95_000 × 0.05
    small = price(rates, "claude-haiku-5-5", input_tokens=10_000, cache_read_tokens=90_000)
    assert small == 1_900  # 10_000 × 0.10 + 90_000 × 0.01
    upper_writes = price(rates, "claude-haiku-5-5", cache_write_5m_tokens=100_000, cache_write_1h_tokens=100_000)
    assert upper_writes == 162_500  # 100_000 × 0.625 + 100_000 × 1.00


@pytest.mark.parametrize(
    ("model", "input_", "output", "read", "w5m", "w1h"),
    [
        ("claude-opus-5-5", 4, 20, 0.20, 5, 8),
        ("claude-opus-4-5", 5, 25, 0.50, 6.25, 10),
        ("claude-haiku-4-5", 1, 5, 0.10, 1.25, 2),
        ("claude-sonnet-4-5", 3, 15, 0.30, 3.75, 6),
    ],
)
def test_other_models(rates: RateCard, model: str, input_: float, output: float, read: float, w5m: float, w1h: float) -> None:
    usage = dict(input_tokens=MTOK, output_tokens=2 * MTOK, cache_read_tokens=3 * MTOK,
                 cache_write_5m_tokens=4 * MTOK, cache_write_1h_tokens=5 * MTOK)
    expected = MTOK * (Decimal(str(input_)) + 2 * Decimal(str(output)) + 3 * Decimal(str(read))
                       + 4 * Decimal(str(w5m)) + 5 * Decimal(str(w1h)))
    assert price(rates, model, **usage) == expected


def test_sonnet_4_5_is_refused_after_its_end_of_life(rates: RateCard) -> None:
    assert price(rates, "claude-sonnet-4-5", date(2026, 11, 30), output_tokens=MTOK) == 15_000_000
    with pytest.raises(SpotterError) as err:
        price(rates, "claude-sonnet-4-5", date(2026, 12, 1), output_tokens=MTOK)
    assert err.value.code == ErrorCode.INVALID_REQUEST
    assert "2026-12-01" in err.value.message
    with pytest.raises(SpotterError):
        rates.upper_bound("claude-sonnet-4-5", 10, 10, date(2026, 12, 1))


def test_no_price_before_effective_from(rates: RateCard) -> None:
    with pytest.raises(SpotterError):
        price(rates, "claude-haiku-4-5", date(2025, 10, 14), input_tokens=1)


def test_unknown_model_is_an_error_never_free(rates: RateCard) -> None:
    for call in (
        lambda: price(rates, "claude-imaginary-9", input_tokens=1),
        lambda: rates.upper_bound("claude-imaginary-9", 1, 1, ON),
    ):
        with pytest.raises(SpotterError) as err:
            call()
        assert err.value.code == ErrorCode.INVALID_REQUEST
        assert "claude-imaginary-9" in err.value.message


def test_upper_bound_bills_every_prompt_token_as_a_1h_write(rates: RateCard) -> None:
    assert rates.upper_bound("claude-sonnet-5-5", 10_000, 2_000, ON) == 60_000  # 10_000 × 4 + 2_000 × 10
    # Band chosen by the estimate: above 100k, Haiku 5.5's upper band applies.
    assert rates.upper_bound("claude-haiku-5-5", 100_000, 1_000, ON) == 20_500  # 100_000 × 0.20 + 1_000 × 0.50
    assert rates.upper_bound("claude-haiku-5-5", 100_001, 1_000, ON) == 102_501  # 100_001 × 1.00 + 1_000 × 2.50
    # Rounded up: a hold never undercuts the real price.
    assert rates.upper_bound("claude-haiku-5-5", 1, 0, ON) == 1


def test_upper_bound_covers_any_split_of_the_prompt(rates: RateCard) -> None:
    bound = rates.upper_bound("claude-sonnet-5-5", 9_000, 1_000, ON)
    for split in [(9_000, 0, 0, 0), (0, 9_000, 0, 0), (0, 0, 9_000, 0), (0, 0, 0, 9_000), (3_000, 2_000, 2_000, 2_000)]:
        usage = dict(zip(("input_tokens", "cache_read_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens"), split))
        assert price(rates, "claude-sonnet-5-5", output_tokens=1_000, **usage) <= bound


def test_sonnet_5_5_reads_halve_on_2026_10_07(rates: RateCard) -> None:
    assert price(rates, "claude-sonnet-5-5", date(2026, 10, 6), cache_read_tokens=MTOK) == 200_000
    assert price(rates, "claude-sonnet-5-5", date(2026, 10, 7), cache_read_tokens=MTOK) == 100_000
    # Everything else is unchanged across the cut.
    for bucket in ("input_tokens", "output_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens"):
        assert price(rates, "claude-sonnet-5-5", date(2026, 10, 6), **{bucket: MTOK}) == \
            price(rates, "claude-sonnet-5-5", date(2026, 10, 7), **{bucket: MTOK})


BEFORE, CUT = date(2026, 10, 6), date(2026, 10, 7)

# Hand-computed: tokens × USD per MTok = micros. One row per model, bucket and date on each side
# of 2026-10-07 (the Sonnet 5.5 read cut and the Haiku 5.5 launch); Haiku 5.5 per band.
HAND = [
    # model, day, bucket, tokens, micros
    ("claude-sonnet-5-5", BEFORE, "input_tokens", MTOK, 2_000_000),
    ("claude-sonnet-5-5", BEFORE, "output_tokens", MTOK, 10_000_000),
    ("claude-sonnet-5-5", BEFORE, "cache_write_5m_tokens", MTOK, 2_500_000),
    ("claude-sonnet-5-5", BEFORE, "cache_write_1h_tokens", MTOK, 4_000_000),
    ("claude-sonnet-5-5", BEFORE, "cache_read_tokens", MTOK, 200_000),
    ("claude-sonnet-5-5", CUT, "input_tokens", MTOK, 2_000_000),
    ("claude-sonnet-5-5", CUT, "output_tokens", MTOK, 10_000_000),
    ("claude-sonnet-5-5", CUT, "cache_write_5m_tokens", MTOK, 2_500_000),
    ("claude-sonnet-5-5", CUT, "cache_write_1h_tokens", MTOK, 4_000_000),
    ("claude-sonnet-5-5", CUT, "cache_read_tokens", MTOK, 100_000),
    ("claude-opus-5-5", BEFORE, "input_tokens", MTOK, 4_000_000),
    ("claude-opus-5-5", BEFORE, "output_tokens", MTOK, 20_000_000),
    ("claude-opus-5-5", BEFORE, "cache_write_5m_tokens", MTOK, 5_000_000),
    ("claude-opus-5-5", BEFORE, "cache_write_1h_tokens", MTOK, 8_000_000),
    ("claude-opus-5-5", BEFORE, "cache_read_tokens", MTOK, 200_000),
    ("claude-opus-5-5", CUT, "input_tokens", MTOK, 4_000_000),
    ("claude-opus-5-5", CUT, "output_tokens", MTOK, 20_000_000),
    ("claude-opus-5-5", CUT, "cache_write_5m_tokens", MTOK, 5_000_000),
    ("claude-opus-5-5", CUT, "cache_write_1h_tokens", MTOK, 8_000_000),
    ("claude-opus-5-5", CUT, "cache_read_tokens", MTOK, 200_000),
    # Haiku 5.5, lower band: a prompt of 100,000 tokens is still in it.
    ("claude-haiku-5-5", CUT, "input_tokens", 100_000, 10_000),
    ("claude-haiku-5-5", CUT, "output_tokens", MTOK, 500_000),
    ("claude-haiku-5-5", CUT, "cache_write_5m_tokens", 100_000, 12_500),
    ("claude-haiku-5-5", CUT, "cache_write_1h_tokens", 100_000, 20_000),
    ("claude-haiku-5-5", CUT, "cache_read_tokens", 100_000, 1_000),
    # Haiku 5.5, long-context band: the same buckets above 100,000 prompt tokens.
    ("claude-haiku-5-5", CUT, "input_tokens", MTOK, 500_000),
    ("claude-haiku-5-5", CUT, "cache_write_5m_tokens", MTOK, 625_000),
    ("claude-haiku-5-5", CUT, "cache_write_1h_tokens", MTOK, 1_000_000),
    ("claude-haiku-5-5", CUT, "cache_read_tokens", MTOK, 50_000),
    ("claude-haiku-4-5", BEFORE, "input_tokens", MTOK, 1_000_000),
    ("claude-haiku-4-5", BEFORE, "output_tokens", MTOK, 5_000_000),
    ("claude-haiku-4-5", BEFORE, "cache_write_5m_tokens", MTOK, 1_250_000),
    ("claude-haiku-4-5", BEFORE, "cache_write_1h_tokens", MTOK, 2_000_000),
    ("claude-haiku-4-5", BEFORE, "cache_read_tokens", MTOK, 100_000),
    ("claude-haiku-4-5", CUT, "input_tokens", MTOK, 1_000_000),
    ("claude-haiku-4-5", CUT, "output_tokens", MTOK, 5_000_000),
    ("claude-haiku-4-5", CUT, "cache_write_5m_tokens", MTOK, 1_250_000),
    ("claude-haiku-4-5", CUT, "cache_write_1h_tokens", MTOK, 2_000_000),
    ("claude-haiku-4-5", CUT, "cache_read_tokens", MTOK, 100_000),
    ("claude-opus-4-5", BEFORE, "input_tokens", MTOK, 5_000_000),
    ("claude-opus-4-5", BEFORE, "output_tokens", MTOK, 25_000_000),
    ("claude-opus-4-5", BEFORE, "cache_write_5m_tokens", MTOK, 6_250_000),
    ("claude-opus-4-5", BEFORE, "cache_write_1h_tokens", MTOK, 10_000_000),
    ("claude-opus-4-5", BEFORE, "cache_read_tokens", MTOK, 500_000),
    ("claude-opus-4-5", CUT, "input_tokens", MTOK, 5_000_000),
    ("claude-opus-4-5", CUT, "output_tokens", MTOK, 25_000_000),
    ("claude-opus-4-5", CUT, "cache_write_5m_tokens", MTOK, 6_250_000),
    ("claude-opus-4-5", CUT, "cache_write_1h_tokens", MTOK, 10_000_000),
    ("claude-opus-4-5", CUT, "cache_read_tokens", MTOK, 500_000),
    ("claude-sonnet-4-5", BEFORE, "input_tokens", MTOK, 3_000_000),
    ("claude-sonnet-4-5", BEFORE, "output_tokens", MTOK, 15_000_000),
    ("claude-sonnet-4-5", BEFORE, "cache_write_5m_tokens", MTOK, 3_750_000),
    ("claude-sonnet-4-5", BEFORE, "cache_write_1h_tokens", MTOK, 6_000_000),
    ("claude-sonnet-4-5", BEFORE, "cache_read_tokens", MTOK, 300_000),
    ("claude-sonnet-4-5", CUT, "input_tokens", MTOK, 3_000_000),
    ("claude-sonnet-4-5", CUT, "output_tokens", MTOK, 15_000_000),
    ("claude-sonnet-4-5", CUT, "cache_write_5m_tokens", MTOK, 3_750_000),
    ("claude-sonnet-4-5", CUT, "cache_write_1h_tokens", MTOK, 6_000_000),
    ("claude-sonnet-4-5", CUT, "cache_read_tokens", MTOK, 300_000),
]


@pytest.mark.parametrize(("model", "day", "bucket", "tokens", "micros"), HAND,
                         ids=[f"{m}-{d}-{b}-{t}" for m, d, b, t, _ in HAND])
def test_every_price_by_model_bucket_and_date(rates: RateCard, model: str, day: date, bucket: str, tokens: int, micros: int) -> None:
    assert price(rates, model, day, **{bucket: tokens}) == micros


def test_haiku_5_5_long_context_band_prices_output_too(rates: RateCard) -> None:
    # 100,001 prompt tokens move the whole request, output included, to $0.50 / $2.50.
    assert price(rates, "claude-haiku-5-5", CUT, input_tokens=100_001, output_tokens=MTOK) == 2_550_001  # 50_000.5 + 2_500_000, half up
    assert price(rates, "claude-haiku-5-5", CUT, input_tokens=100_000, output_tokens=MTOK) == 510_000


def test_every_model_on_the_card_is_tabled(rates: RateCard) -> None:
    assert {row[0] for row in HAND} == set(rates.models)


def test_every_period_cites_its_source_and_date(rates: RateCard) -> None:
    for model, periods in rates.models.items():
        for period in periods:
            assert period.source and period.checked, f"{model} from {period.effective_from} has no source"


@pytest.mark.parametrize(("model", "day"), [
    ("claude-haiku-5-5", date(2026, 10, 6)),  # the day before its release
    ("claude-sonnet-5-5", date(2026, 9, 27)),
    ("claude-opus-5-5", date(2026, 9, 21)),
    ("claude-opus-4-5", date(2025, 11, 23)),
])
def test_a_model_without_a_price_that_day_is_refused_never_free(rates: RateCard, model: str, day: date) -> None:
    for call in (lambda: price(rates, model, day, input_tokens=1), lambda: rates.upper_bound(model, 1, 1, day)):
        with pytest.raises(SpotterError) as err:
            call()
        assert err.value.code == ErrorCode.INVALID_REQUEST
        assert model in err.value.message and day.isoformat() in err.value.message


def test_rate_card_is_validated(tmp_path) -> None:
    overlapping = {"models": {"m": [
        {"effective_from": "2026-01-01", "input": 1, "output": 1, "cache_read": 1, "cache_write_5m": 1, "cache_write_1h": 1},
        {"effective_from": "2026-06-01", "input": 2, "output": 2, "cache_read": 2, "cache_write_5m": 2, "cache_write_1h": 2},
    ]}}
    path = tmp_path / "rates.json"
    path.write_text(json.dumps(overlapping))
    with pytest.raises(ValueError, match="overlap"):
        RateCard.load(path)
    bounded_last = {"models": {"m": [{"effective_from": "2026-01-01", "bands": [
        {"max_prompt_tokens": 10, "input": 1, "output": 1, "cache_read": 1, "cache_write_5m": 1, "cache_write_1h": 1},
    ]}]}}
    path.write_text(json.dumps(bounded_last))
    with pytest.raises(ValueError, match="unbounded"):
        RateCard.load(path)


def test_prices_match_decimal_arithmetic_on_every_band_of_the_card(rates: RateCard) -> None:
    """Prices are worked out in integers over each band's common denominator: the same micros as
    Decimal arithmetic rounded once (half up for a price, up for a hold), on every band of the card,
    including the halves where rounding decides."""
    rng = random.Random(14)
    checked = 0
    for model, periods in rates.models.items():
        for period in periods:
            limits = [b.max_prompt_tokens for b in period.bands]
            for band, limit in zip(period.bands, limits):
                prompt_cap = limit if limit is not None else 400_000
                for _ in range(300):
                    usage = ModelUsage(input_tokens=rng.randint(0, prompt_cap // 4), output_tokens=rng.randint(0, 64_000),
                                       cache_read_tokens=rng.randint(0, prompt_cap // 4),
                                       cache_write_5m_tokens=rng.choice((0, 1, 2, 3, 49, 50, rng.randint(0, prompt_cap // 4))),
                                       cache_write_1h_tokens=rng.randint(0, prompt_cap // 4))
                    if period.band(prompt_tokens(usage)) is not band:
                        continue
                    exact = (usage.input_tokens * band.input + usage.output_tokens * band.output
                             + usage.cache_read_tokens * band.cache_read + usage.cache_write_5m_tokens * band.cache_write_5m
                             + usage.cache_write_1h_tokens * band.cache_write_1h)
                    assert rates.price(model, usage, period.effective_from) == int(exact.quantize(Decimal(1), ROUND_HALF_UP))
                    prompt, output = prompt_tokens(usage), usage.output_tokens
                    dearest = max(band.input, band.cache_read, band.cache_write_5m, band.cache_write_1h)
                    bound = (prompt * dearest + output * band.output).quantize(Decimal(1), ROUND_CEILING)
                    assert rates.upper_bound(model, prompt, output, period.effective_from) == int(bound)
                    checked += 1
    assert checked > 1_000
