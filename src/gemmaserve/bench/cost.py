"""Cost per token from an hourly price and a measured throughput: pure arithmetic.

$/M output tokens = price_usd_per_hour / (output tok/s × 3600 × utilisation) × 10⁶.
An endpoint bills every hour it is up, busy or idle, so at utilisation u the
cost of a served token is 1/u times the fully-busy figure. Between two GPUs the
slower one is cheaper per token only when its price ratio is below its speed ratio.
Prices come from a live lookup when one is passed in (AWS Pricing API), else the catalog.
"""

from __future__ import annotations

from pydantic import BaseModel

from gemmaserve.bench.schema import ResultFile
from gemmaserve.bench.stats import decode_rate, median
from gemmaserve.sagemaker.cost import PriceLookup, PriceQuote, catalog_price


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


def usd_per_million_tokens(price_usd_per_hour: float, output_tokens_per_s: float, *, utilisation: float = 1.0) -> float:
    """Dollars per million output tokens at a throughput, billed by the hour at ``utilisation`` (0 < u ≤ 1)."""
    if price_usd_per_hour < 0:
        raise ValueError(f"price must be >= 0, got {price_usd_per_hour}")
    if output_tokens_per_s <= 0:
        raise ValueError(f"throughput must be > 0 tok/s, got {output_tokens_per_s}")
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation}")
    return price_usd_per_hour / (output_tokens_per_s * 3600.0 * utilisation) * 1e6


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


def cost_table(result: ResultFile, *, utilisation: float = 1.0) -> CostTable | None:
    """$/M output tokens at the single-stream decode rate and each load level; None without a price."""
    price = result.hardware.price_usd_per_hour
    if price is None:
        return None
    points: list[CostPoint] = []
    if result.decode is not None:
        try:
            rate = decode_rate(
                result.decode.short_e2el_s,
                result.decode.long_e2el_s,
                short_tokens=result.decode.short_tokens,
                long_tokens=result.decode.long_tokens,
            ).rate_tokens_per_s
        except ValueError:
            rate = None
        if rate is not None:
            points.append(
                CostPoint(
                    concurrency=0,
                    output_tokens_per_s=rate,
                    usd_per_million_output_tokens=usd_per_million_tokens(price, rate, utilisation=utilisation),
                )
            )
    for level in result.load:
        throughput = level_throughput(level.output_tokens_per_s)
        if throughput is None:
            continue
        points.append(
            CostPoint(
                concurrency=level.concurrency,
                output_tokens_per_s=throughput,
                usd_per_million_output_tokens=usd_per_million_tokens(price, throughput, utilisation=utilisation),
            )
        )
    return CostTable(
        label=result.target.label,
        price_usd_per_hour=price,
        price_source=result.hardware.price_source,
        price_date=result.hardware.price_date,
        utilisation=utilisation,
        points=points,
    )


def level_throughput(output_tokens_per_s: list[float]) -> float | None:
    """The median aggregate tok/s over a level's repeats; None when no repeat finished or it is 0."""
    if not output_tokens_per_s:
        return None
    value = median(output_tokens_per_s)
    return value if value > 0 else None


def hourly_price(instance_type: str, region: str, *, live_lookup: PriceLookup | None = None) -> PriceQuote | None:
    """The price to bill a result at: the live quote when a lookup is given and answers, else the catalog's."""
    if live_lookup is not None:
        quote = live_lookup(instance_type, region)
        if quote is not None:
            return quote
    return catalog_price(instance_type, region)
