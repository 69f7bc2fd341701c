"""Dollars per hour and per token (gemmaserve.cost): by hand, from the definitions."""

from __future__ import annotations

import pytest

from gemmaserve import cost
from gemmaserve.cost import PriceQuote


def test_usd_per_million_tokens_by_hand() -> None:
    # $0.72/h at 100 tok/s: 360,000 tokens an hour -> $2.00 per million.
    assert cost.usd_per_million_tokens(0.72, 100.0) == pytest.approx(2.0)
    # Busy a quarter of the time: the idle hours bill too, so 4x per token.
    assert cost.usd_per_million_tokens(0.72, 100.0, utilisation=0.25) == pytest.approx(8.0)


@pytest.mark.parametrize(
    ("price", "rate", "utilisation"), [(-1.0, 10.0, 1.0), (1.0, 0.0, 1.0), (1.0, 10.0, 0.0), (1.0, 10.0, 1.5)]
)
def test_bad_cost_inputs_are_refused(price: float, rate: float, utilisation: float) -> None:
    with pytest.raises(ValueError):
        cost.usd_per_million_tokens(price, rate, utilisation=utilisation)


def test_break_even_slower_wins_when_its_price_ratio_is_below_its_speed_ratio() -> None:
    # T4 at half the L4's speed for 40% of its price: 0.4 < 0.5, the T4 wins.
    verdict = cost.break_even("t4", 0.40, 50.0, "l4", 1.00, 100.0)
    assert verdict.slower == "t4" and verdict.cheaper == "t4"
    assert verdict.price_ratio == pytest.approx(0.4)
    assert verdict.speed_ratio == pytest.approx(0.5)
    assert verdict.cost_ratio == pytest.approx(0.8)
    assert "t4 is cheaper per token despite being slower" in verdict.sentence


def test_break_even_faster_wins_otherwise_and_order_does_not_matter() -> None:
    one = cost.break_even("l4", 1.00, 100.0, "t4", 0.60, 50.0)
    two = cost.break_even("t4", 0.60, 50.0, "l4", 1.00, 100.0)
    assert one.cheaper == two.cheaper == "l4"
    assert one.cost_ratio == pytest.approx(1.2) == two.cost_ratio


def test_break_even_tie() -> None:
    assert cost.break_even("a", 0.5, 50.0, "b", 1.0, 100.0).cheaper is None


def test_hourly_price_prefers_a_live_quote_and_falls_back_to_the_catalog() -> None:
    asked: list[tuple[str, str]] = []

    def live(instance: str, region: str) -> PriceQuote | None:
        asked.append((instance, region))
        if instance == "ml.g4dn.xlarge":
            return PriceQuote(
                instance_type=instance, usd_per_hour=0.9, region=region, date="2026-12-02", source="aws-pricing-api"
            )
        return None

    quote = cost.hourly_price("ml.g4dn.xlarge", "eu-west-1", live_lookup=live)
    assert quote is not None and (quote.usd_per_hour, quote.source) == (0.9, "aws-pricing-api")
    fallback = cost.hourly_price("ml.g6.xlarge", "us-east-1", live_lookup=live)
    assert fallback is not None and fallback.source.startswith("https://")
    assert asked == [("ml.g4dn.xlarge", "eu-west-1"), ("ml.g6.xlarge", "us-east-1")]
    assert cost.hourly_price("no.such.type", "us-east-1") is None
