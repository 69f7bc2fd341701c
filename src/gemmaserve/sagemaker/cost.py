"""Hourly prices and what an endpoint has cost so far (arithmetic pure; catalog read lazily).

Prices are the catalog's dated list prices unless a live quote (``pricing.py``) is
passed in; every figure says where it came from and when.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel


class PriceQuote(BaseModel):
    instance_type: str
    usd_per_hour: float
    region: str
    date: str
    source: str
    estimated: bool = False


PriceLookup = Callable[[str, str], PriceQuote | None]


def catalog_price(instance_type: str, region: str) -> PriceQuote | None:
    """The catalog's list price (recorded for one region; marked estimated when the region differs)."""
    from gemmaserve.catalog import load_catalog

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


def hourly_usd(price: PriceQuote | None, instance_count: int) -> float | None:
    if price is None:
        return None
    return price.usd_per_hour * instance_count


def cost_so_far_usd(usd_per_hour: float | None, elapsed_s: float) -> float | None:
    if usd_per_hour is None:
        return None
    return usd_per_hour * max(elapsed_s, 0.0) / 3600.0


class PriceRange(BaseModel):
    """What an InstancePools endpoint may cost: its cheapest and dearest known type, and those with no price."""

    low_usd_per_hour: float
    high_usd_per_hour: float
    unpriced: list[str] = []
    quotes: list[PriceQuote] = []


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
