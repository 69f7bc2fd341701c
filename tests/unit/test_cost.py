"""Dollars per hour and per token (gemmaserve.cost): by hand, from the definitions."""

from __future__ import annotations

import pytest

from gemmaserve import cost
from gemmaserve.catalog import load_catalog
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


def _quote(instance_type: str, usd_per_hour: float, region: str = "us-east-1") -> PriceQuote:
    return PriceQuote(
        instance_type=instance_type, usd_per_hour=usd_per_hour, region=region, date="2026-12-01", source="test"
    )


@pytest.mark.parametrize(
    ("price", "rate", "utilisation", "expected"),
    [
        # 1 tok/s is 3,600 tokens an hour: $3.60/h -> $1,000 per million.
        (3.6, 1.0, 1.0, 1000.0),
        # $1/h at 1,000,000/3,600 tok/s: exactly a million tokens an hour -> $1.
        (1.0, 1e6 / 3600, 1.0, 1.0),
        # Half busy: each served token carries an idle one's hour too -> 2x.
        (1.0, 1e6 / 3600, 0.5, 2.0),
        # Fully busy is the boundary that is allowed.
        (0.36, 10.0, 1.0, 10.0),
        # A free instance costs nothing per token, whatever the rate.
        (0.0, 123.0, 0.3, 0.0),
    ],
)
def test_usd_per_million_tokens_from_the_definition(
    price: float, rate: float, utilisation: float, expected: float
) -> None:
    assert cost.usd_per_million_tokens(price, rate, utilisation=utilisation) == pytest.approx(expected)


def test_usd_per_million_tokens_scales_with_price_and_inversely_with_rate() -> None:
    base = cost.usd_per_million_tokens(1.0, 100.0)
    assert cost.usd_per_million_tokens(3.0, 100.0) == pytest.approx(3 * base)
    assert cost.usd_per_million_tokens(1.0, 400.0) == pytest.approx(base / 4)
    assert cost.usd_per_million_tokens(1.0, 100.0, utilisation=0.1) == pytest.approx(10 * base)


def test_cost_point_is_one_row_of_the_formula() -> None:
    point = cost.cost_point(4, 0.72, 200.0, utilisation=0.5)
    assert (point.concurrency, point.output_tokens_per_s) == (4, 200.0)
    # 200 tok/s × 3600 × 0.5 = 360,000 billed tokens an hour: $0.72 / 0.36 M = $2.
    assert point.usd_per_million_output_tokens == pytest.approx(2.0)
    with pytest.raises(ValueError):
        cost.cost_point(0, 0.72, 0.0)


@pytest.mark.parametrize(
    ("a_price", "a_rate", "b_price", "b_rate"),
    [(0.0, 10.0, 1.0, 10.0), (1.0, 10.0, -1.0, 10.0), (1.0, 0.0, 1.0, 10.0), (1.0, 10.0, 1.0, -5.0)],
)
def test_break_even_refuses_non_positive_prices_and_rates(
    a_price: float, a_rate: float, b_price: float, b_rate: float
) -> None:
    with pytest.raises(ValueError):
        cost.break_even("a", a_price, a_rate, "b", b_price, b_rate)


def test_break_even_at_equal_speed_the_cheaper_hour_wins() -> None:
    # Same speed: the speed ratio is 1, so the price ratio alone decides.
    verdict = cost.break_even("a", 2.0, 100.0, "b", 1.0, 100.0)
    assert verdict.cheaper == "b"
    assert verdict.speed_ratio == pytest.approx(1.0)
    assert verdict.cost_ratio == pytest.approx(verdict.price_ratio / verdict.speed_ratio)


def test_hourly_usd_multiplies_by_the_instance_count() -> None:
    assert cost.hourly_usd(_quote("ml.x", 0.75), 4) == pytest.approx(3.0)
    assert cost.hourly_usd(_quote("ml.x", 0.75), 1) == pytest.approx(0.75)
    assert cost.hourly_usd(_quote("ml.x", 0.75), 0) == 0.0
    assert cost.hourly_usd(None, 3) is None


@pytest.mark.parametrize(
    ("usd_per_hour", "elapsed_s", "expected"),
    [
        (3.6, 0.0, 0.0),
        (3.6, 1.0, 0.001),  # $3.60 an hour is a tenth of a cent a second
        (3.6, 3599.0, 3.599),  # a second short of the hour
        (3.6, 3600.0, 3.6),  # exactly one hour
        (3.6, 3601.0, 3.601),  # across the boundary: billed by the second, no jump to a second hour
        (2.0, 5400.0, 3.0),  # an hour and a half
        (2.0, -30.0, 0.0),  # a clock behind the creation time bills nothing, never a negative
        (0.0, 7200.0, 0.0),
    ],
)
def test_cost_so_far_is_the_hourly_rate_times_the_hours_up(
    usd_per_hour: float, elapsed_s: float, expected: float
) -> None:
    assert cost.cost_so_far_usd(usd_per_hour, elapsed_s) == pytest.approx(expected)


def test_cost_so_far_without_a_price_is_none() -> None:
    assert cost.cost_so_far_usd(None, 3600.0) is None


def test_price_range_over_a_pool_names_the_unpriced_types() -> None:
    table = {"ml.a": 1.0, "ml.b": 3.0, "ml.c": 2.0}
    asked: list[tuple[str, str]] = []

    def lookup(instance_type: str, region: str) -> PriceQuote | None:
        asked.append((instance_type, region))
        usd = table.get(instance_type)
        return None if usd is None else _quote(instance_type, usd, region)

    pool = ["ml.b", "ml.unknown", "ml.a", "ml.c", "ml.other"]
    found = cost.price_range(pool, "eu-west-1", lookup)
    assert found is not None
    assert (found.low_usd_per_hour, found.high_usd_per_hour) == (1.0, 3.0)
    assert found.unpriced == ["ml.unknown", "ml.other"]  # in the pool's order
    assert [quote.instance_type for quote in found.quotes] == ["ml.b", "ml.a", "ml.c"]
    assert asked == [(name, "eu-west-1") for name in pool]  # every type asked once, in the caller's region

    # Two instances bill twice as much, at both ends of the range.
    doubled = cost.price_range(pool, "eu-west-1", lookup, instance_count=2)
    assert doubled is not None and (doubled.low_usd_per_hour, doubled.high_usd_per_hour) == (2.0, 6.0)

    # One priced type: the range is a point.
    single = cost.price_range(["ml.c"], "eu-west-1", lookup)
    assert single is not None and single.low_usd_per_hour == single.high_usd_per_hour == 2.0
    assert single.unpriced == []


def test_price_range_is_none_when_no_type_has_a_price() -> None:
    assert cost.price_range(["ml.x", "ml.y"], "us-east-1", lambda _type, _region: None) is None
    assert cost.price_range([], "us-east-1", lambda _type, _region: None) is None


def test_catalog_price_is_the_recorded_price_marked_estimated_outside_its_region() -> None:
    recorded = load_catalog().instances["ml.g4dn.xlarge"].price
    assert recorded is not None and not recorded.estimated
    home = cost.catalog_price("ml.g4dn.xlarge", recorded.region)
    assert home is not None
    assert (home.usd_per_hour, home.region, home.date, home.source) == (
        recorded.usd_per_hour,
        recorded.region,
        recorded.date,
        recorded.source,
    )
    assert home.estimated is False
    # Asked for another region, the quote keeps the region it was recorded in and says it is an estimate.
    away = cost.catalog_price("ml.g4dn.xlarge", "ap-southeast-2")
    assert away is not None and away.region == recorded.region and away.estimated is True


def test_catalog_price_keeps_the_catalogs_own_estimate_mark() -> None:
    estimated = next(
        key for key, instance in load_catalog().instances.items() if instance.price and instance.price.estimated
    )
    quote = cost.catalog_price(estimated, "us-east-1")
    assert quote is not None and quote.estimated is True


def test_catalog_price_of_an_unknown_type_is_none() -> None:
    assert cost.catalog_price("ml.no.such.type", "us-east-1") is None


def test_hourly_price_falls_back_when_the_live_lookup_knows_nothing() -> None:
    quote = cost.hourly_price("ml.g4dn.xlarge", "us-east-1", live_lookup=lambda _type, _region: None)
    assert quote == cost.catalog_price("ml.g4dn.xlarge", "us-east-1")
