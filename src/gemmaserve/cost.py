"""Dollars per hour and per token: price types and their arithmetic (pure core: no I/O, no boto3, no bench).

$/M output tokens = price_usd_per_hour / (output tok/s × 3600 × utilisation) × 10⁶.
An endpoint bills every hour it is up, busy or idle, so at utilisation u the cost of
a served token is 1/u times the fully-busy figure. Between two GPUs the slower one is
cheaper per token only when its price ratio is below its speed ratio. Prices are the
catalog's dated list prices unless a live lookup is passed in (the AWS Pricing API
adapter, ``gemmaserve.sagemaker.aws``); every figure says where it came from and when.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from gemmaserve.catalog import load_catalog

SECONDS_PER_HOUR = 3600.0


class PriceQuote(BaseModel):
    instance_type: str
    usd_per_hour: float
    region: str
    date: str
    source: str
    estimated: bool = False


PriceLookup = Callable[[str, str], PriceQuote | None]


class PriceRange(BaseModel):
    """What an InstancePools endpoint may cost: its cheapest and dearest known type, and those with no price."""

    low_usd_per_hour: float
    high_usd_per_hour: float
    unpriced: list[str] = []
    quotes: list[PriceQuote] = []


class CostPoint(BaseModel):
    concurrency: int  # 0 marks the single-stream decode rate
    output_tokens_per_s: float
    usd_per_million_output_tokens: float


class CostTable(BaseModel):
    label: str
    price_usd_per_hour: float
    price_source: str | None
    price_date: str | None
    utilisation: float
    points: list[CostPoint]


class BreakEven(BaseModel):
    """Which of two deployments serves a token more cheaply, and by the rule, why."""

    cheaper: str | None  # label; None when they cost the same
    slower: str
    price_ratio: float  # slower's price / faster's price
    speed_ratio: float  # slower's tok/s / faster's tok/s
    cost_ratio: float  # slower's $/token / faster's $/token
    sentence: str


def catalog_price(instance_type: str, region: str) -> PriceQuote | None:
    """The catalog's list price (recorded for one region; marked estimated when the region differs)."""
    instance = load_catalog().instances.get(instance_type)
    if instance is None or instance.price is None:
        return None
    price = instance.price
    return PriceQuote(
        instance_type=instance_type,
        usd_per_hour=price.usd_per_hour,
        region=price.region,
        date=price.date,
        source=price.source,
        estimated=price.estimated or price.region != region,
    )


def hourly_price(instance_type: str, region: str, *, live_lookup: PriceLookup | None = None) -> PriceQuote | None:
    """The price to bill a result at: the live quote when a lookup is given and answers, else the catalog's."""
    if live_lookup is not None:
        quote = live_lookup(instance_type, region)
        if quote is not None:
            return quote
    return catalog_price(instance_type, region)


def hourly_usd(price: PriceQuote | None, instance_count: int) -> float | None:
    """What ``instance_count`` instances bill an hour; None without a price."""
    if price is None:
        return None
    return price.usd_per_hour * instance_count


def cost_so_far_usd(usd_per_hour: float | None, elapsed_s: float) -> float | None:
    """What an endpoint has billed after ``elapsed_s`` (a negative span, from clock skew, counts as 0)."""
    if usd_per_hour is None:
        return None
    return usd_per_hour * max(elapsed_s, 0.0) / SECONDS_PER_HOUR


def price_range(
    instance_types: list[str], region: str, lookup: PriceLookup, instance_count: int = 1
) -> PriceRange | None:
    """None when no type has a price; else the range over those that do (``unpriced`` names the rest)."""
    quotes = {name: lookup(name, region) for name in instance_types}
    known = [quote for quote in quotes.values() if quote is not None]
    if not known:
        return None
    prices = [quote.usd_per_hour * instance_count for quote in known]
    return PriceRange(
        low_usd_per_hour=min(prices),
        high_usd_per_hour=max(prices),
        unpriced=[name for name, quote in quotes.items() if quote is None],
        quotes=known,
    )


def usd_per_million_tokens(price_usd_per_hour: float, output_tokens_per_s: float, *, utilisation: float = 1.0) -> float:
    """Dollars per million output tokens at a throughput, billed by the hour at ``utilisation`` (0 < u ≤ 1)."""
    if price_usd_per_hour < 0:
        raise ValueError(f"price must be >= 0, got {price_usd_per_hour}")
    if output_tokens_per_s <= 0:
        raise ValueError(f"throughput must be > 0 tok/s, got {output_tokens_per_s}")
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation}")
    return price_usd_per_hour / (output_tokens_per_s * SECONDS_PER_HOUR * utilisation) * 1e6


def cost_point(
    concurrency: int, price_usd_per_hour: float, output_tokens_per_s: float, *, utilisation: float = 1.0
) -> CostPoint:
    """One row of a cost table: $/M output tokens at one load level (concurrency 0: the single stream)."""
    return CostPoint(
        concurrency=concurrency,
        output_tokens_per_s=output_tokens_per_s,
        usd_per_million_output_tokens=usd_per_million_tokens(
            price_usd_per_hour, output_tokens_per_s, utilisation=utilisation
        ),
    )


def break_even(
    a_label: str,
    a_price_usd_per_hour: float,
    a_tokens_per_s: float,
    b_label: str,
    b_price_usd_per_hour: float,
    b_tokens_per_s: float,
) -> BreakEven:
    """Apply the break-even rule to two deployments measured at the same workload."""
    if min(a_price_usd_per_hour, b_price_usd_per_hour) <= 0 or min(a_tokens_per_s, b_tokens_per_s) <= 0:
        raise ValueError("break-even needs positive prices and throughputs")
    if a_tokens_per_s <= b_tokens_per_s:
        slow, slow_price, slow_speed, fast, fast_price, fast_speed = (
            a_label,
            a_price_usd_per_hour,
            a_tokens_per_s,
            b_label,
            b_price_usd_per_hour,
            b_tokens_per_s,
        )
    else:
        slow, slow_price, slow_speed, fast, fast_price, fast_speed = (
            b_label,
            b_price_usd_per_hour,
            b_tokens_per_s,
            a_label,
            a_price_usd_per_hour,
            a_tokens_per_s,
        )
    price_ratio = slow_price / fast_price
    speed_ratio = slow_speed / fast_speed
    cost_ratio = price_ratio / speed_ratio
    if abs(cost_ratio - 1) < 1e-12:
        cheaper, verdict = None, "they cost the same per token"
    elif price_ratio < speed_ratio:
        cheaper, verdict = slow, f"{slow} is cheaper per token despite being slower"
    else:
        cheaper, verdict = fast, f"{fast} is cheaper per token"
    sentence = (
        f"{slow} runs at {speed_ratio:.2f}x the speed of {fast} for {price_ratio:.2f}x the price: "
        f"{verdict} ({slow} costs {cost_ratio:.2f}x per token; the slower one wins only when its "
        f"price ratio is below its speed ratio)."
    )
    return BreakEven(
        cheaper=cheaper,
        slower=slow,
        price_ratio=price_ratio,
        speed_ratio=speed_ratio,
        cost_ratio=cost_ratio,
        sentence=sentence,
    )
