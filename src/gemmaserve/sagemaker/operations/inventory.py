"""Everything gemmaserve left in SageMaker, across regions: endpoints with age, status and cost, and orphans.

Ours = tagged ``gemmaserve:tool=gemmaserve``. An orphan is a model or endpoint config of
ours that no existing endpoint uses (a failed or interrupted deploy's debris, which also
blocks the next deploy of that name). Fail closed: a region that cannot be read is
reported and makes the inventory incomplete, and an endpoint without a known price makes
the total a lower bound; neither is ever shown as $0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any

from pydantic import BaseModel, Field, computed_field

from gemmaserve.cost import PriceLookup, PriceRange, catalog_price, cost_so_far_usd, price_range
from gemmaserve.errors import AwsError, GemmaserveError, UsageError
from gemmaserve.progress import ProgressEvent, report, time_left
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import ClientFactory, Deps, call, is_not_found, paginate
from gemmaserve.sagemaker.operations.status import EndpointStatus, describe_endpoint_state
from gemmaserve.sagemaker.operations.teardown import (
    DeleteReport,
    EntryState,
    Journal,
    JournalEntry,
    Removal,
    arn_of,
    delete_deployment,
    delete_resources,
    usage_by_other_endpoints,
)
from gemmaserve.sagemaker.spec.container import is_expired, parse_tags, tags_to_dict
from gemmaserve.sagemaker.spec.requests import CleanupRequest, DeleteRequest

# A model or config younger than this may belong to a deploy still making its next call.
ORPHAN_GRACE = timedelta(minutes=15)


class DeploymentSummary(BaseModel):
    endpoint_name: str
    region: str
    status: EndpointStatus
    instance_type: str | None  # the placed type; None while an InstancePools endpoint has none placed
    pool_types: list[str] = []
    instance_count: int | None
    created_at: datetime | None
    age_s: float | None
    owner: str | None
    model: str | None
    expires_at: datetime | None
    keep: bool
    expired: bool
    usd_per_hour: float | None  # None: price unknown (see price_range)
    price_range: PriceRange | None = None  # the pool's cheapest to dearest type, for instance_count instances
    price_source: str | None
    cost_so_far_usd: float | None


class OrphanResource(BaseModel):
    kind: str  # "model" or "endpoint-config"
    name: str
    region: str
    created_at: datetime | None
    owner: str | None


class RegionError(BaseModel):
    region: str
    error: str
    message: str


class Inventory(ActionResult):
    regions: list[str]
    endpoints: list[DeploymentSummary]
    orphans: list[OrphanResource] = Field(default_factory=list)
    # Creates a run sent and never settled (it died, or its teardown left or never saw them): cleanup --journal
    journal: list[JournalEntry] = Field(default_factory=list)
    errors: list[RegionError]
    total_usd_per_hour: float  # a lower bound when total_is_lower_bound
    unpriced: list[str] = Field(default_factory=list)  # endpoints billing at an unknown price

    @computed_field  # type: ignore[prop-decorator]
    @property
    def complete(self) -> bool:
        """Every region was read: a missing endpoint is really absent, not just unread."""
        return not self.errors

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_is_lower_bound(self) -> bool:
        return bool(self.errors or self.unpriced)

    def succeeded(self) -> bool:
        """Every region was read: an absence in a region that could not be read proves nothing."""
        return self.complete


class CleanupVerdict(StrEnum):
    WOULD_DELETE = "would delete"
    DELETED = "deleted"
    REFUSED = "refused"  # delete refused it (something in it is not gemmaserve's): nothing of it was deleted
    FAILED = "failed"  # an AWS error part-way: what is left is in the detail
    LEFT = "left"  # deleted in part; the detail names what is still there
    OTHER_OWNER = "other owner"  # another owner's: left alone without --any-owner
    ABSENT = "already absent"  # a journal entry whose resource SageMaker says is not there
    ANOTHER_RUN = "another run's"  # a journal entry's name, now on a resource a later run made: left alone


class CleanupItem(BaseModel):
    """One resource cleanup chose or passed over, and what became of it."""

    kind: str  # endpoint, endpoint-config or model
    name: str
    region: str
    owner: str | None
    verdict: CleanupVerdict
    detail: str = ""
    fix: str | None = None


BAD_VERDICTS = frozenset({CleanupVerdict.REFUSED, CleanupVerdict.FAILED, CleanupVerdict.LEFT})


class CleanupReport(ActionResult):
    dry_run: bool
    owner: str | None = None  # whose resources were chosen; None: any owner's
    expired: list[DeploymentSummary]
    orphans: list[OrphanResource] = Field(default_factory=list)
    deleted: list[DeleteReport]
    items: list[CleanupItem] = Field(default_factory=list)
    errors: list[RegionError]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def complete(self) -> bool:
        return not self.errors

    def succeeded(self) -> bool:
        """Every region was read and every chosen resource is gone (or, in a dry run, could be)."""
        return self.complete and not any(item.verdict in BAD_VERDICTS for item in self.items)


def list_deployments(
    regions: list[str],
    deps: Deps,
    *,
    price_lookup: PriceLookup = catalog_price,
    orphans: bool = True,
    pace: Callable[[], float] = time.monotonic,
) -> Inventory:
    """Our endpoints and (``orphans``) leftovers in each region, read one region after another; with several
    regions each read is reported with the regions left and an ETA from the pace so far (``--all-regions``
    reads 30-odd regions: most of a minute). ``pace`` is the monotonic clock of that ETA."""
    factory, now, progress, clock = deps.clients, deps.now(), deps.progress, pace
    endpoints: list[DeploymentSummary] = []
    found_orphans: list[OrphanResource] = []
    errors: list[RegionError] = []
    started = clock()
    for done, region in enumerate(regions, start=1):
        try:
            sm = factory("sagemaker", region)
            endpoints.extend(_region_deployments(sm, region, now, price_lookup))
            if orphans:
                found_orphans.extend(find_orphans(sm, region, now=now))
        except AwsError as error:
            errors.append(RegionError(region=region, error=type(error).__name__, message=error.message))
        if len(regions) > 1:
            eta = time_left(clock() - started, done, len(regions))
            report(
                progress,
                ProgressEvent(
                    "list", f"Read {region} ({done}/{len(regions)} regions{eta})", done=done, total=len(regions)
                ),
            )
    billing = [item for item in endpoints if item.status.billing]
    total = sum(_lower_usd(item) for item in billing)
    unpriced = [f"{item.endpoint_name} ({item.region})" for item in billing if item.usd_per_hour is None]
    return Inventory(
        regions=regions,
        endpoints=endpoints,
        orphans=found_orphans,
        errors=errors,
        total_usd_per_hour=round(total, 4),
        unpriced=unpriced,
    )


def _lower_usd(item: DeploymentSummary) -> float:
    if item.usd_per_hour is not None:
        return item.usd_per_hour
    if item.price_range is not None and not item.price_range.unpriced:
        return item.price_range.low_usd_per_hour
    return 0.0


def _region_deployments(sm: Any, region: str, now: datetime, price_lookup: PriceLookup) -> list[DeploymentSummary]:
    found = []
    for page in paginate(region, sm, "list_endpoints"):
        for summary in page.get("Endpoints", []):
            tags = tags_to_dict(call(region, sm.list_tags, ResourceArn=summary["EndpointArn"]).get("Tags", []))
            ours = parse_tags(tags)
            if ours is None:
                continue
            state = describe_endpoint_state(sm, summary["EndpointName"], region=region, now=now)
            if state.status is EndpointStatus.NOT_FOUND:
                continue
            count = state.instance_count or 1
            placed = state.instance_type
            price = price_lookup(placed, region) if placed else None
            usd_per_hour = price.usd_per_hour * count if price else None
            pool = price_range(state.pool_types, region, price_lookup, count) if state.pool_types else None
            age_s = state.elapsed_s
            found.append(
                DeploymentSummary(
                    endpoint_name=state.endpoint_name,
                    region=region,
                    status=state.status,
                    instance_type=placed,
                    pool_types=state.pool_types,
                    instance_count=state.instance_count,
                    created_at=state.created_at,
                    age_s=age_s,
                    owner=ours.owner,
                    model=ours.model,
                    expires_at=ours.expires_at,
                    keep=ours.keep,
                    expired=is_expired(ours, now),
                    usd_per_hour=usd_per_hour,
                    price_range=pool,
                    price_source=f"{price.source} ({price.date}{', estimated' if price.estimated else ''})"
                    if price
                    else None,
                    cost_so_far_usd=cost_so_far_usd(usd_per_hour, age_s or 0.0) if state.status.billing else None,
                )
            )
    return found


def find_orphans(sm: Any, region: str, *, now: datetime) -> list[OrphanResource]:
    """Our models and endpoint configs that no existing endpoint uses (older than :data:`ORPHAN_GRACE`)."""
    used_configs, used_models = usage_by_other_endpoints(sm, region)
    orphans: list[OrphanResource] = []
    listings = (
        (
            "endpoint-config",
            "list_endpoint_configs",
            "EndpointConfigs",
            "EndpointConfigName",
            "EndpointConfigArn",
            used_configs,
        ),
        ("model", "list_models", "Models", "ModelName", "ModelArn", used_models),
    )
    for kind, operation, key, name_key, arn_key, used in listings:
        for page in paginate(region, sm, operation):
            for item in page.get(key, []):
                name = item[name_key]
                created = item.get("CreationTime")
                if name in used or (created is not None and now - created < ORPHAN_GRACE):
                    continue
                try:
                    tags = tags_to_dict(call(region, sm.list_tags, ResourceArn=item[arn_key]).get("Tags", []))
                except AwsError as error:
                    if is_not_found(error):
                        continue
                    raise
                ours = parse_tags(tags)
                if ours is not None:
                    orphans.append(
                        OrphanResource(kind=kind, name=name, region=region, created_at=created, owner=ours.owner)
                    )
    return orphans


def delete_orphan(sm: Any, orphan: OrphanResource) -> DeleteReport:
    """Delete one orphan after checking again that no endpoint took it up meanwhile."""

    report = DeleteReport(endpoint_name="", region=orphan.region)
    used_configs, used_models = usage_by_other_endpoints(sm, orphan.region)
    if orphan.name in (used_configs if orphan.kind == "endpoint-config" else used_models):
        report.skipped.append(f"{orphan.kind}:{orphan.name} (now used by an endpoint)")
        return report
    configs = [orphan.name] if orphan.kind == "endpoint-config" else []
    models = [orphan.name] if orphan.kind == "model" else []
    return delete_resources(sm, Removal(orphan.region, configs=configs, models=models), report)


def cleanup_expired(
    request: CleanupRequest,
    deps: Deps,
    *,
    owner: str | None,
    price_lookup: PriceLookup = catalog_price,
    delete: Callable[[Any, str, str], DeleteReport] | None = None,
) -> CleanupReport:
    """Delete (``request.expired``) every endpoint of ``owner``'s (None: anyone's) past its TTL, and
    (``request.orphans``) their unused models and configs, in the request's regions.

    One refusal or failure does not stop the sweep: each resource gets its verdict in ``items``, and ``ok`` is
    false at the end if any was refused, failed or left in part.
    """
    factory, regions, dry_run, expired = deps.clients, request.chosen_regions(), request.dry_run, request.expired
    inventory = list_deployments(regions, deps, price_lookup=price_lookup, orphans=request.orphans)
    candidates = [item for item in inventory.endpoints if item.expired] if expired else []
    chosen = [item for item in candidates if owner is None or item.owner == owner]
    chosen_orphans = [item for item in inventory.orphans if owner is None or item.owner == owner]
    report = CleanupReport(
        dry_run=dry_run,
        owner=owner,
        expired=chosen,
        orphans=chosen_orphans,
        deleted=[],
        errors=list(inventory.errors),
    )
    for endpoint in [item for item in candidates if item not in chosen]:
        report.items.append(_item("endpoint", endpoint.endpoint_name, endpoint, CleanupVerdict.OTHER_OWNER))
    for orphan in [item for item in inventory.orphans if item not in chosen_orphans]:
        report.items.append(_item(orphan.kind, orphan.name, orphan, CleanupVerdict.OTHER_OWNER))
    if dry_run:
        report.items[:0] = [_item("endpoint", e.endpoint_name, e, CleanupVerdict.WOULD_DELETE) for e in chosen] + [
            _item(o.kind, o.name, o, CleanupVerdict.WOULD_DELETE) for o in chosen_orphans
        ]
        return report
    remove = delete or (
        lambda sm, name, region: delete_deployment(sm, DeleteRequest(endpoint_name=name, region=region), Deps())
    )
    done: list[CleanupItem] = []
    for endpoint in chosen:
        sm = factory("sagemaker", endpoint.region)
        done.append(_attempt(report, "endpoint", endpoint.endpoint_name, endpoint, partial(
            remove, sm, endpoint.endpoint_name, endpoint.region
        )))  # fmt: skip
    # configs before models: a config names its model, and a model in use is not an orphan
    for orphan in sorted(chosen_orphans, key=lambda o: o.kind != "endpoint-config"):
        sm = factory("sagemaker", orphan.region)
        done.append(_attempt(report, orphan.kind, orphan.name, orphan, partial(delete_orphan, sm, orphan)))
    report.items[:0] = done
    return report


def _item(kind: str, name: str, source: DeploymentSummary | OrphanResource, verdict: CleanupVerdict) -> CleanupItem:
    return CleanupItem(kind=kind, name=name, region=source.region, owner=source.owner, verdict=verdict)


def _attempt(
    report: CleanupReport,
    kind: str,
    name: str,
    source: DeploymentSummary | OrphanResource,
    delete: Callable[[], DeleteReport],
) -> CleanupItem:
    """Delete one chosen resource; its verdict, never an exception that would end the sweep."""
    item = _item(kind, name, source, CleanupVerdict.DELETED)
    try:
        outcome = delete()
    except UsageError as refusal:  # delete's own refusal: something in it is not gemmaserve's
        item.verdict, item.detail, item.fix = CleanupVerdict.REFUSED, refusal.message, refusal.hint
        return item
    except GemmaserveError as error:
        item.verdict, item.detail, item.fix = CleanupVerdict.FAILED, error.message, error.hint
        return item
    report.deleted.append(outcome)
    if outcome.remaining:
        item.verdict = CleanupVerdict.LEFT
        item.detail = "still there: " + ", ".join(outcome.remaining)
    elif outcome.skipped:
        item.detail = "left in place: " + ", ".join(outcome.skipped)
    return item


def settle_journal(
    factory: ClientFactory, regions: list[str], *, journal: Journal, dry_run: bool, report: CleanupReport
) -> None:
    """Settle the journal's open entries in ``regions``: delete each resource that is there with its run's tags,
    close the entries SageMaker says are absent; each gets its verdict in ``report.items``."""
    from gemmaserve.sagemaker.spec.container import CREATED_KEY, made_by_run

    order = {"endpoint": 0, "endpoint-config": 1, "model": 2}
    entries = sorted(
        (entry for entry in journal.open_entries() if entry.region in regions), key=lambda e: order.get(e.kind, 3)
    )
    for entry in entries:
        item = CleanupItem(
            kind=entry.kind, name=entry.name, region=entry.region, owner=entry.owner, verdict=CleanupVerdict.DELETED
        )
        report.items.append(item)
        sm = factory("sagemaker", entry.region)
        try:
            arn = arn_of(sm, entry.region, entry.kind, entry.name)
            if arn is None:
                item.verdict = CleanupVerdict.ABSENT
                if not dry_run:
                    journal.mark(entry.id, EntryState.ABSENT)
                continue
            tags = tags_to_dict(call(entry.region, sm.list_tags, ResourceArn=arn).get("Tags", []))
            if not made_by_run(tags, entry.created_tag):
                item.verdict = CleanupVerdict.ANOTHER_RUN
                item.detail = f"{entry.key} now carries created-at {tags.get(CREATED_KEY)}, not this entry's"
                if not dry_run:
                    journal.mark(entry.id, EntryState.ABSENT)  # the journaled one is gone; this one is not its
                continue
            if dry_run:
                item.verdict = CleanupVerdict.WOULD_DELETE
                continue
            removal = Removal(
                entry.region,
                endpoint=entry.name if entry.kind == "endpoint" else None,
                configs=[entry.name] if entry.kind == "endpoint-config" else [],
                models=[entry.name] if entry.kind == "model" else [],
            )
            found = DeleteReport(endpoint_name=entry.name if entry.kind == "endpoint" else "", region=entry.region)
            outcome = delete_resources(sm, removal, found)
            report.deleted.append(outcome)
            journal.mark(entry.id, EntryState.DELETED)
        except GemmaserveError as error:
            item.verdict, item.detail, item.fix = CleanupVerdict.FAILED, error.message, error.hint
