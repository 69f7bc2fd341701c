"""Live on-demand prices from the AWS Pricing API, falling back to the catalog's dated list price (adapter).

The Pricing API answers only in a few regions (us-east-1 here) whatever region is
priced; SageMaker real-time hosting products carry a ``usagetype`` ending in
``Host:<instance type>``.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from gemmaserve.cost import PriceLookup, PriceQuote, catalog_price
from gemmaserve.errors import AwsError
from gemmaserve.sagemaker.aws import ClientFactory, paginate

PRICING_REGION = "us-east-1"
PRICING_SOURCE = "AWS Pricing API (AmazonSageMaker, on-demand)"


def pricing_api_price(pricing: Any, instance_type: str, region: str, *, today: date) -> PriceQuote | None:
    """The on-demand hosting price of ``instance_type`` in ``region``, or None when the API has none."""
    filters = [
        {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
    ]
    for page in paginate(PRICING_REGION, pricing, "get_products", ServiceCode="AmazonSageMaker", Filters=filters):
        for item in page.get("PriceList", []):
            product = json.loads(item) if isinstance(item, str) else item
            usage = product.get("product", {}).get("attributes", {}).get("usagetype", "")
            if not usage.endswith(f"Host:{instance_type}"):
                continue
            usd = _on_demand_usd(product)
            if usd is not None and usd > 0:
                return PriceQuote(
                    instance_type=instance_type,
                    usd_per_hour=usd,
                    region=region,
                    date=today.isoformat(),
                    source=PRICING_SOURCE,
                )
    return None


def _on_demand_usd(product: dict[str, Any]) -> float | None:
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            if dimension.get("unit", "").lower() in ("hrs", "hours", "hour"):
                value = dimension.get("pricePerUnit", {}).get("USD")
                if value is not None:
                    return float(value)
    return None


def make_price_lookup(factory: ClientFactory | None, *, today: date) -> PriceLookup:
    """Live prices when a factory (credentials) is given, else or on failure the catalog; cached per process."""
    cache: dict[tuple[str, str], PriceQuote | None] = {}

    def lookup(instance_type: str, region: str) -> PriceQuote | None:
        key = (instance_type, region)
        if key not in cache:
            quote = None
            if factory is not None:
                try:
                    quote = pricing_api_price(factory("pricing", PRICING_REGION), instance_type, region, today=today)
                except AwsError:
                    quote = None  # no pricing:GetProducts permission, or offline: the dated list price will do
            cache[key] = quote or catalog_price(instance_type, region)
        return cache[key]

    return lookup
