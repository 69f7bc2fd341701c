"""The cost table of a result file: the core's $/token arithmetic (``gemmaserve.cost``) at its measured rates.

Here, not in ``gemmaserve.cost``, because the rates come from bench's schema and
statistics (the differencing decode rate, medians of repeats): the core must not
import the bench package. Pure: reads no file.
"""

from __future__ import annotations

from gemmaserve.cost import CostPoint, CostTable, cost_point
from gemmaserve.measurements.schema import ResultFile
from gemmaserve.measurements.stats import decode_rate, median


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
            points.append(cost_point(0, price, rate, utilisation=utilisation))
    for level in result.load:
        throughput = level_throughput(level.output_tokens_per_s)
        if throughput is None:
            continue
        points.append(cost_point(level.concurrency, price, throughput, utilisation=utilisation))
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
