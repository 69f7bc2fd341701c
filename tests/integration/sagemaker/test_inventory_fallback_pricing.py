"""list / cleanup --expired across regions, region fallback, and live prices (moto server + Stubber)."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gemmaserve.cost import PriceQuote
from gemmaserve.errors import CapacityUnavailable
from gemmaserve.sagemaker.aws import Deps, QuotaCheck, make_price_lookup, pricing_api_price
from gemmaserve.sagemaker.deployment.endpoint import RegionTries, deploy_across_regions, execute_deploy, plan_deploy
from gemmaserve.sagemaker.operations.inventory import cleanup_expired, list_deployments
from gemmaserve.sagemaker.operations.status import EndpointStatus
from gemmaserve.sagemaker.spec.requests import CleanupRequest
from tests.support.sagemaker.helpers import START, ScriptedClock, make_role, make_spec


def fixed_price(instance_type: str, region: str) -> PriceQuote:
    return PriceQuote(instance_type=instance_type, usd_per_hour=0.75, region=region, date="2026-12-01", source="test")


def deploy(moto_factory: Any, region: str, name: str, ttl_s: float | None) -> None:
    role = make_role(moto_factory("iam", region), name=f"role-{name}")
    plan = plan_deploy(make_spec(role, endpoint_name=name, ttl_s=ttl_s), region=region, now=START)
    execute_deploy(moto_factory("sagemaker", region), plan, Deps(clock=lambda: START))


def test_list_finds_ours_across_regions_and_cleanup_deletes_only_the_expired(moto_factory: Any) -> None:
    deploy(moto_factory, "us-east-1", "short-lived", ttl_s=3600)
    deploy(moto_factory, "us-west-2", "kept", ttl_s=None)
    deploy(moto_factory, "us-west-2", "long-lived", ttl_s=10 * 3600)
    sm = moto_factory("sagemaker", "us-east-1")  # an endpoint someone else made, untagged
    sm.create_endpoint(EndpointName="not-ours", EndpointConfigName="short-lived-config")
    later = START + timedelta(hours=2)
    inventory = list_deployments(
        ["us-east-1", "us-west-2"], Deps(factory=moto_factory, clock=lambda: later), price_lookup=fixed_price
    )
    names = {(item.region, item.endpoint_name): item for item in inventory.endpoints}
    assert set(names) == {("us-east-1", "short-lived"), ("us-west-2", "kept"), ("us-west-2", "long-lived")}
    assert names[("us-east-1", "short-lived")].expired and not names[("us-west-2", "kept")].expired
    assert names[("us-west-2", "kept")].keep and names[("us-west-2", "kept")].owner == "ana"
    assert inventory.total_usd_per_hour == pytest.approx(3 * 0.75)
    assert all(item.instance_type == "ml.g4dn.xlarge" for item in inventory.endpoints)

    deps = Deps(factory=moto_factory, clock=lambda: later)
    request = CleanupRequest(regions=["us-east-1", "us-west-2"], expired=True, dry_run=True)
    dry = cleanup_expired(request, deps, owner="ana", price_lookup=fixed_price)
    assert [item.endpoint_name for item in dry.expired] == ["short-lived"] and dry.deleted == []
    request = request.model_copy(update={"dry_run": False})
    report = cleanup_expired(request, deps, owner="ana", price_lookup=fixed_price)
    assert [d.endpoint_name for d in report.deleted] == ["short-lived"]
    left = {e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]}
    assert left == {"not-ours"}
    assert {e["EndpointName"] for e in moto_factory("sagemaker", "us-west-2").list_endpoints()["Endpoints"]} == {
        "kept",
        "long-lived",
    }


def test_a_region_that_fails_is_reported_not_hidden(moto_factory: Any) -> None:
    class Broken:
        def __call__(self, service: str, region: str) -> Any:
            if region == "eu-west-1":
                client = boto3.client("sagemaker", region_name=region)
                stub = Stubber(client)
                stub.add_client_error(
                    "list_endpoints",
                    service_error_code="AccessDeniedException",
                    service_message="no",
                    http_status_code=400,
                )
                stub.activate()
                return client
            return moto_factory(service, region)

    inventory = list_deployments(
        ["us-east-1", "eu-west-1"], Deps(factory=Broken(), clock=lambda: START), price_lookup=fixed_price
    )
    assert [(e.region, e.error) for e in inventory.errors] == [("eu-west-1", "AwsAccessDenied")]


def test_fallback_skips_a_region_without_quota(moto_factory: Any) -> None:
    clock = ScriptedClock()
    spec = make_spec(make_role(moto_factory("iam", "us-east-1")))

    def quota(region: str) -> list[QuotaCheck]:
        limit = 0 if region == "us-east-1" else 2
        return [
            QuotaCheck(
                region=region,
                instance_type="ml.g4dn.xlarge",
                quota_name="q",
                limit=limit,
                used=0,
                needed=1,
                ok=limit >= 1,
            )
        ]

    outcome = deploy_across_regions(
        spec,
        ["us-east-1", "us-west-2"],
        Deps(factory=moto_factory, clock=clock.now),
        RegionTries(quota_checker=quota, price_lookup=fixed_price),
    )
    assert [(a.region, a.outcome) for a in outcome.attempts] == [
        ("us-east-1", "skipped-quota"),
        ("us-west-2", "deployed"),
    ]
    assert outcome.result.plan.image_uri.startswith("763104351884.dkr.ecr.us-west-2.")
    assert moto_factory("sagemaker", "us-east-1").list_endpoints()["Endpoints"] == []


def test_fallback_tears_down_a_capacity_failure_and_moves_on(moto_factory: Any) -> None:
    clock = ScriptedClock()
    spec = make_spec(make_role(moto_factory("iam", "us-east-1")))

    def wait(region: str) -> Any:
        if region == "us-east-2":
            raise CapacityUnavailable("no g4dn", region=region)
        return None

    deps = Deps(factory=moto_factory, clock=clock.now)
    tries = RegionTries(wait=wait, price_lookup=fixed_price)
    outcome = deploy_across_regions(spec, ["us-east-2", "eu-west-1"], deps, tries)
    assert [a.outcome for a in outcome.attempts] == ["capacity", "deployed"]
    assert moto_factory("sagemaker", "us-east-2").list_endpoints()["Endpoints"] == []
    assert moto_factory("sagemaker", "us-east-2").list_models()["Models"] == []
    with pytest.raises(CapacityUnavailable, match="No region"):
        deploy_across_regions(spec.model_copy(update={"endpoint_name": "other"}), ["us-east-2"], deps, tries)


def _product(usage: str, usd: str) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"usagetype": usage, "instanceName": "ml.g4dn.xlarge"}},
            "terms": {"OnDemand": {"X": {"priceDimensions": {"Y": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}},
        }
    )


def test_pricing_api_picks_the_hosting_product() -> None:
    pricing = boto3.client("pricing", region_name="us-east-1")
    filters = [
        {"Type": "TERM_MATCH", "Field": "instanceName", "Value": "ml.g4dn.xlarge"},
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-west-2"},
    ]
    with Stubber(pricing) as stub:
        stub.add_response(
            "get_products",
            {
                "PriceList": [
                    _product("USW2-Notebk:ml.g4dn.xlarge", "0.9"),
                    _product("USW2-Host:ml.g4dn.xlarge", "0.7364"),
                ]
            },
            {"ServiceCode": "AmazonSageMaker", "Filters": filters},
        )
        quote = pricing_api_price(pricing, "ml.g4dn.xlarge", "us-west-2", today=date(2026, 12, 2))
    assert quote is not None and quote.usd_per_hour == pytest.approx(0.7364) and quote.date == "2026-12-02"


def test_price_lookup_falls_back_to_the_dated_catalog_price() -> None:
    pricing = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(pricing)
    stub.add_client_error("get_products", service_error_code="AccessDeniedException", http_status_code=400)
    stub.activate()
    lookup = make_price_lookup(lambda service, region: pricing, today=date(2026, 12, 2))
    quote = lookup("ml.g4dn.xlarge", "us-east-1")
    assert quote is not None and quote.source.startswith("https://aws.amazon.com/sagemaker/pricing")
    assert lookup("ml.g4dn.xlarge", "us-east-1") is quote  # cached: one API call
    assert make_price_lookup(None, today=date(2026, 12, 2))("ml.nothing", "us-east-1") is None


def test_status_enum_is_spelled_like_the_api() -> None:
    assert EndpointStatus("InService") is EndpointStatus.IN_SERVICE and EndpointStatus.CREATING.busy


def test_a_sweep_of_several_regions_reports_each_with_an_eta(moto_factory: Any) -> None:
    from gemmaserve.progress import ProgressEvent

    ticks = iter(range(0, 100, 2))  # each region takes 2 s on this clock
    events: list[ProgressEvent] = []
    list_deployments(
        ["us-east-1", "us-west-2", "eu-west-1"],
        Deps(factory=moto_factory, clock=lambda: START, progress=events.append),
        price_lookup=fixed_price,
        pace=lambda: float(next(ticks)),
    )
    assert [(e.done, e.total) for e in events] == [(1, 3), (2, 3), (3, 3)]
    assert [e.message for e in events] == [
        "Read us-east-1 (1/3 regions, about 4 s left)",
        "Read us-west-2 (2/3 regions, about 2 s left)",
        "Read eu-west-1 (3/3 regions)",
    ]
