"""Views of the SageMaker results: preflight, deploy, update, an endpoint's state, logs, reply, delete, the
inventory and its cleanup, autoscaling, JumpStart, the execution role and the derived T4 image.

The MCP summaries (:func:`summary`) are the short text an agent reads (one or two lines); the structured
content carries the whole result. ``image render`` prints the Dockerfile, or with ``--buildspec`` the
buildspec: :class:`ImageBuildspec` is the same plan seen that way.
"""

from __future__ import annotations

import json
from typing import Any

from gemmaserve.cost import PriceRange
from gemmaserve.findings import Finding, Status
from gemmaserve.sagemaker.api import DeployOutcome
from gemmaserve.sagemaker.deployment.endpoint import PlannedCall
from gemmaserve.sagemaker.deployment.preflight import PreflightReport
from gemmaserve.sagemaker.deployment.update import UpdateResult
from gemmaserve.sagemaker.image.codebuild import ImageBuildPlan, ImageBuildResult
from gemmaserve.sagemaker.image.iam import RoleResult
from gemmaserve.sagemaker.image.jumpstart import JumpStartListing
from gemmaserve.sagemaker.operations.autoscale import AutoscaleResult
from gemmaserve.sagemaker.operations.inventory import BAD_VERDICTS, CleanupReport, CleanupVerdict, Inventory
from gemmaserve.sagemaker.operations.logs import EndpointLogs
from gemmaserve.sagemaker.operations.runtime import InvokeResult
from gemmaserve.sagemaker.operations.status import EndpointState, EndpointStatus, status_line
from gemmaserve.sagemaker.operations.teardown import DeleteReport
from gemmaserve.views import summary, view
from gemmaserve.views.page import Block, Line, Page, Row, Style, page, table

FINDING_STYLE: dict[Status, Style] = {Status.OK: "good", Status.WARN: "warn", Status.FAIL: "bad"}


def _findings(findings: list[Finding]) -> list[Line]:
    """Each finding as ``status check: detail`` (the status words padded to the longest, ``unknown``), and its
    fix under it when it did not pass."""
    lines: list[Line] = []
    for finding in findings:
        style = FINDING_STYLE.get(finding.status, "bad" if finding.status is Status.UNKNOWN else "dim")
        lines.append(Line(f"  {finding.status.value:<7} {finding.check}: {finding.detail}", style))
        if finding.fix and finding.status is not Status.OK:
            lines.append(Line(f"          fix: {finding.fix}"))
    return lines


@view(PreflightReport)
def preflight_page(report: PreflightReport) -> Page:
    return page(
        f"Preflight {report.model}/{report.encoding} on {', '.join(report.instance_types)} "
        f"in {', '.join(report.regions)} with {report.image_uri}",
        *_findings(report.findings),
        Line("Result: ready to deploy", "good")
        if report.ok
        else Line("Result: not ready (fail or unknown above)", "bad"),
    )


@summary(PreflightReport)
def preflight_summary(report: PreflightReport) -> str:
    if report.ok:
        return "Ready to deploy."
    return "Not ready: " + "; ".join(
        f"{f.check} {f.status.value}: {f.detail}" + (f" (fix: {f.fix})" if f.fix else "") for f in report.failures()
    )


def usd_range(price_range: PriceRange) -> str:
    """``$1.127–1.369/hour``, and the pool's types with no price."""
    text = f"${price_range.low_usd_per_hour:.3f}–{price_range.high_usd_per_hour:.3f}/hour"
    if price_range.unpriced:
        text += f" (price unknown for {', '.join(price_range.unpriced)})"
    return text


def _call_lines(calls: list[PlannedCall]) -> list[str]:
    """Each planned call as ``service:Operation {params}`` (its tags said once, elsewhere)."""
    return [
        f"  {call.service}:{call.operation} "
        + json.dumps({key: value for key, value in call.params.items() if key != "Tags"}, sort_keys=True)
        for call in calls
    ]


@view(DeployOutcome)
def deploy_page(outcome: DeployOutcome) -> Page:
    plan = outcome.plan
    price = "price unknown"
    if plan.price_range is not None:
        price = usd_range(plan.price_range) + " depending on the type SageMaker places"
    elif plan.price and plan.usd_per_hour is not None:
        estimated = ", estimated" if plan.price.estimated else ""
        price = f"${plan.usd_per_hour:.3f}/hour ({plan.price.source}, {plan.price.date}{estimated})"
    where = (
        plan.instance_types[0]
        if len(plan.instance_types) == 1
        else "an instance pool of " + " > ".join(plan.instance_types)
    )
    head: list[Block] = [
        Line(f"Endpoint {plan.endpoint_name} in {plan.region} on {where} at {price}", "bold"),
        Line(f"Image: {plan.image_uri}"),
        Line("The container will run: vllm serve " + " ".join(plan.masked_serve_args())),
    ]
    if outcome.dry_run:
        tags: list[dict[str, str]] = plan.calls[0].params.get("Tags", []) if plan.calls else []
        return page(
            *head,
            *(
                [
                    Line("Offline preflight (quota, role and model id are checked when deploying):"),
                    *_findings(outcome.preflight.findings),
                ]
                if outcome.preflight is not None
                else []
            ),
            "Dry run — these calls would be made:",
            *_call_lines(plan.masked_calls()),
            "Tags on each resource: " + ", ".join(f"{tag['Key']}={tag['Value']}" for tag in tags),
        )
    state = outcome.result.state if outcome.result else None
    return page(
        *head,
        *(f"  {attempt.region}: {attempt.outcome} ({attempt.detail})" for attempt in outcome.attempts),
        None
        if state is None
        else Line(
            f"{state.endpoint_name}: {state.status.value} on {_placement(state)}",
            "good" if state.status is EndpointStatus.IN_SERVICE else None,
        ),
    )


def _placement(state: EndpointState) -> str:
    """The placed type; for a pool with none placed yet (or not reported), the pool's types."""
    if state.instance_type and not state.pool_types:
        return state.instance_type
    if state.instance_type:
        return f"{state.instance_type} (pool {', '.join(state.pool_types)})"
    return f"pool {', '.join(state.pool_types)} (placed type not reported yet)" if state.pool_types else "?"


@summary(DeployOutcome)
def deploy_summary(outcome: DeployOutcome) -> str:
    """One line: where, at what price, and what became of it (a dry run: the calls, and why preflight would
    refuse it)."""
    plan = outcome.plan
    price = f"${plan.usd_per_hour:.3f}/hour" if plan.usd_per_hour is not None else "an unknown price"
    where = plan.instance_types[0] if plan.instance_types else "?"
    if plan.price_range is not None:
        where = "an instance pool of " + " > ".join(plan.instance_types)
        price = f"${plan.price_range.low_usd_per_hour:.3f}–{plan.price_range.high_usd_per_hour:.3f}/hour"
    head = f"Endpoint {plan.endpoint_name} in {plan.region} on {where} at {price}"
    if outcome.dry_run:
        calls = ", ".join(call.operation for call in plan.calls)
        text = f"Dry run: {head}. Would call {calls}. Container runs: vllm serve {' '.join(plan.masked_serve_args())}"
        failed = outcome.preflight.failures(accept_unknown=True) if outcome.preflight else []
        if failed:
            text += ". A deploy would be refused: " + "; ".join(f"{f.check}: {f.detail}" for f in failed)
        return text
    state = outcome.result.state if outcome.result else None
    tail = status_line(state) if state else "created; not waited for (call sagemaker_wait)"
    return f"{head}. {tail}. It bills until deleted: sagemaker_delete {plan.endpoint_name}."


@view(UpdateResult)
def update_page(result: UpdateResult) -> Page:
    plan = result.plan
    policy = plan.policy
    size = f" {policy.percent}% of the new fleet" if policy.percent else ""
    extra = f"${plan.usd_per_hour:.3f}/hour" if plan.usd_per_hour is not None else "an unknown price"
    head = [
        Line(
            f"Update {plan.endpoint_name} in {plan.region}: new variant {plan.variant_name} "
            f"({plan.model_name}, {plan.config_name})",
            "bold",
        ),
        Line(
            f"Policy: {policy.mode.value}{size}, bake {policy.bake_s} s per step, old fleet kept "
            f"{policy.termination_wait_s} s after the last shift, at most {policy.max_execution_s} s in all"
        ),
        Line("Rollback alarms: " + ", ".join(plan.alarm_names)),
        Line(f"Gate: {plan.gate}"),
        Line(f"While both fleets run the new one adds {extra}"),
    ]
    if result.dry_run:
        return page(
            *head,
            "Dry run — these calls would be made (preflight of the new variant first):",
            *_call_lines(plan.masked_calls()),
        )
    return page(
        *head,
        None
        if result.gate is None
        else Line(
            f"Gate verdict: {result.gate.verdict.value}: " + "; ".join(result.gate.reasons),
            "good" if result.gate.passed else "bad",
        ),
        Line(
            f"Outcome: {result.outcome.value}" + (f" ({result.rollback})" if result.rollback else ""),
            "good" if result.ok else "bad",
        ),
        "Deleted: " + ", ".join(result.deleted) if result.deleted else None,
        Line("Left: " + ", ".join(result.remaining), "warn") if result.remaining else None,
        *(f"  next: {command}" for command in result.commands),
    )


@summary(UpdateResult)
def update_summary(result: UpdateResult) -> str:
    plan = result.plan
    extra = f"${plan.usd_per_hour:.3f}/hour" if plan.usd_per_hour is not None else "an unknown price"
    head = (
        f"Update {plan.endpoint_name} in {plan.region} to variant {plan.variant_name}, "
        f"{plan.policy.mode.value}; the new fleet adds {extra} while both run"
    )
    if result.dry_run:
        return f"Dry run: {head}. Would call {', '.join(c.operation for c in plan.calls)}. Gate: {plan.gate}."
    verdict = f" Gate: {result.gate.verdict.value}." if result.gate else ""
    return f"{head}. {result.outcome.value}.{verdict}"


STATE_STYLE: dict[EndpointStatus, Style] = {
    EndpointStatus.IN_SERVICE: "good",
    EndpointStatus.FAILED: "bad",
    EndpointStatus.UPDATE_ROLLBACK_FAILED: "bad",
}


@view(EndpointState)
def state_page(state: EndpointState) -> Page:
    price = None
    if state.usd_per_hour is not None:
        price = f"${state.usd_per_hour:.3f}/hour"
    elif state.price_range is not None:
        price = usd_range(state.price_range)
    elif state.status is not EndpointStatus.NOT_FOUND:
        price = "price unknown"
    facts = (
        ("instance", state.instance_type),
        ("pool", ", ".join(state.pool_types) or None),
        ("price", price),
        ("image", state.resolved_image or state.image),
        ("elapsed", f"{state.elapsed_s / 60:.1f} min" if state.elapsed_s is not None else None),
        ("reason", state.failure_reason),
    )
    return page(
        Line(f"{state.endpoint_name} ({state.region}): {state.status.value}", STATE_STYLE.get(state.status)),
        *(f"  {label:<9}{value}" for label, value in facts if value),
    )


@summary(EndpointState)
def state_summary(state: EndpointState) -> str:
    """The wait's own status line (what the CLI shows as progress)."""
    return status_line(state)


@view(EndpointLogs)
def logs_page(result: EndpointLogs) -> Page:
    """The log's lines (``HH:MM:SS message``), then what the engine facts parsed from them say."""
    return page(
        None
        if result.log_group_exists
        else Line(
            f"No log group {result.log_group} yet (capacity wait, or the container cannot start).",
            "warn",
        ),
        *(f"{line.timestamp:%H:%M:%S} {line.message}" for line in result.lines),
        Line(f"(only the first {len(result.lines)} lines were read)", "warn") if result.truncated else None,
        Line("Engine facts: " + _facts(result), "dim"),
    )


def _facts(result: EndpointLogs) -> str:
    facts = {k: v for k, v in result.facts.model_dump(mode="json").items() if v not in (None, [], "not_started")}
    return ", ".join(f"{k}={v}" for k, v in facts.items()) or "none yet"


@summary(EndpointLogs)
def logs_summary(result: EndpointLogs) -> str:
    if not result.log_group_exists:
        return f"No log group {result.log_group} yet (capacity wait, or the container cannot start)."
    truncated = " (truncated)" if result.truncated else ""
    return f"{len(result.lines)} lines from {result.log_group}{truncated}. Engine facts: {_facts(result)}"


@view(InvokeResult)
def invoke_page(result: InvokeResult) -> Page:
    """The reply's text alone (scripts pipe it); the usage and latency are in ``--json``."""
    return page(result.text)


@view(DeleteReport)
def delete_page(report: DeleteReport) -> Page:
    return page(
        f"{'Would delete' if report.dry_run else 'Deleted'}: {', '.join(report.deleted) or 'nothing'}",
        f"Already absent: {', '.join(report.absent)}" if report.absent else None,
        f"Left in place: {', '.join(report.skipped)}" if report.skipped else None,
        Line(f"Still there: {', '.join(report.remaining)}", "bad") if report.remaining else None,
        Line(f"Sent but not seen: {', '.join(report.unconfirmed)}", "warn") if report.unconfirmed else None,
        *(f"  next: {command}" for command in report.commands),
    )


@summary(DeleteReport)
def delete_summary(report: DeleteReport) -> str:
    return "; ".join(line.text.strip() for line in delete_page(report).blocks if isinstance(line, Line))


@view(Inventory)
def inventory_page(inventory: Inventory) -> Page:
    rows = [
        Row(
            (
                item.endpoint_name,
                item.region,
                item.owner or "?",
                item.status.value,
                item.instance_type or ("pool:" + "|".join(item.pool_types) if item.pool_types else "?"),
                f"{item.age_s / 3600:.1f}h" if item.age_s is not None else "?",
                _usd(item.usd_per_hour, item.price_range),
                ("keep" if item.keep else (f"{item.expires_at:%Y-%m-%d %H:%M}Z" if item.expires_at else "?"))
                + (" EXPIRED" if item.expired else ""),
            ),
            "warn" if item.expired else None,
        )
        for item in inventory.endpoints
    ]
    columns = ["ENDPOINT", "REGION", "OWNER", "STATUS", "INSTANCE", "AGE>", "$/H>", "EXPIRES"]
    read = len(inventory.regions) - len(inventory.errors)
    return page(
        table(columns, rows)
        if rows
        else Line(f"No endpoints of gemmaserve's in the {read} region(s) read.", "dim")
        if read
        else None,
        _total(inventory),
        "Sent by a run that ended without settling them (settle: gemmaserve sagemaker cleanup --journal):"
        if inventory.journal
        else None,
        *(
            f"  {entry.kind}:{entry.name} ({entry.region}, {entry.owner or '?'}, sent {entry.sent_at:%Y-%m-%d %H:%M}Z"
            f" by pid {entry.pid}; {'its process is gone' if entry.state == 'sent' else entry.state})"
            for entry in inventory.journal
        ),
        "Leftovers with no endpoint (delete: gemmaserve sagemaker cleanup --orphans):" if inventory.orphans else None,
        *(
            f"  {orphan.kind}:{orphan.name} ({orphan.region}, owner {orphan.owner or '?'})"
            for orphan in inventory.orphans
        ),
    )


def _usd(usd_per_hour: float | None, price_range: PriceRange | None) -> str:
    if usd_per_hour is not None:
        return f"{usd_per_hour:.3f}"
    if price_range is not None:
        return f"{price_range.low_usd_per_hour:.2f}-{price_range.high_usd_per_hour:.2f}"
    return "unknown"


def _total(inventory: Inventory) -> Line:
    if inventory.errors and len(inventory.errors) == len(inventory.regions):
        return Line(f"Total: unknown (no region could be read: {', '.join(inventory.regions)})", "bad")
    why = []
    if inventory.unpriced:
        why.append(f"price unknown for {', '.join(inventory.unpriced)}")
    if inventory.errors:
        why.append(f"{len(inventory.errors)} region(s) unread")
    bound = "at least " if inventory.total_is_lower_bound else ""
    return Line(
        f"Total: {bound}${inventory.total_usd_per_hour:.3f}/hour" + (f" ({'; '.join(why)})" if why else ""),
        "warn" if why else "bold",
    )


@summary(Inventory)
def inventory_summary(inventory: Inventory) -> str:
    bound = "at least " if inventory.total_is_lower_bound else ""
    text = f"{len(inventory.endpoints)} endpoints, {bound}${inventory.total_usd_per_hour:.3f}/hour in total"
    if inventory.unpriced:
        text += "; price unknown for " + ", ".join(inventory.unpriced)
    if inventory.orphans:
        text += f"; {len(inventory.orphans)} leftover models/configs (sagemaker_cleanup with orphans=true)"
    if inventory.journal:
        text += f"; {len(inventory.journal)} unsettled journal entries (sagemaker_cleanup with journal=true)"
    if inventory.errors:
        text += "; INCOMPLETE, could not check: " + ", ".join(f"{e.region} ({e.message})" for e in inventory.errors)
    return text


CLEANUP_STYLE: dict[CleanupVerdict, Style] = {
    CleanupVerdict.DELETED: "good",
    CleanupVerdict.OTHER_OWNER: "dim",
    CleanupVerdict.ABSENT: "dim",
    CleanupVerdict.ANOTHER_RUN: "dim",
    CleanupVerdict.REFUSED: "bad",
    CleanupVerdict.FAILED: "bad",
    CleanupVerdict.LEFT: "bad",
}


@view(CleanupReport)
def cleanup_page(report: CleanupReport) -> Page:
    """Each resource chosen or passed over with its verdict (and a refusal's fix under it)."""
    lines: list[Line] = []
    for item in report.items:
        detail = f": {item.detail}" if item.detail else ""
        if item.verdict is CleanupVerdict.OTHER_OWNER:
            detail = " (left alone: add --any-owner to include it)"
        lines.append(
            Line(
                f"{item.verdict.value:<13} {item.kind}:{item.name} ({item.region}, {item.owner or 'no owner tag'}){detail}",
                CLEANUP_STYLE.get(item.verdict),
            )
        )
        if item.fix:
            lines.append(Line(f"{'':<13} fix: {item.fix}"))
    whose = "any owner" if report.owner is None else f"owner {report.owner}"
    unread = f" in the regions read; {len(report.errors)} region(s) could not be read" if report.errors else ""
    return page(None if report.items else f"Nothing to delete ({whose}){unread}.", *lines)


@summary(CleanupReport)
def cleanup_summary(report: CleanupReport) -> str:
    names = ", ".join(f"{e.endpoint_name} ({e.region})" for e in report.expired) or "none"
    text = ("Would delete" if report.dry_run else "Expired and deleted") + f": {names}"
    if report.orphans:
        text += "; orphans: " + ", ".join(f"{o.kind}:{o.name} ({o.region})" for o in report.orphans)
    bad = [item for item in report.items if item.verdict in BAD_VERDICTS]
    if bad:
        text += "; NOT DONE: " + ", ".join(f"{item.kind}:{item.name} ({item.verdict.value})" for item in bad)
    if report.errors:
        text += "; INCOMPLETE, could not check: " + ", ".join(f"{e.region} ({e.message})" for e in report.errors)
    return text


@view(AutoscaleResult)
def autoscale_page(result: AutoscaleResult) -> Page:
    return page(
        f"{'Would register' if result.dry_run else 'Registered'} {result.resource_id}: "
        f"{result.min_instances}–{result.max_instances} instances, target "
        f"{result.target_invocations_per_instance:g} invocations/instance/min ({result.policy_name})"
    )


@view(JumpStartListing)
def jumpstart_page(listing: JumpStartListing) -> Page:
    if not listing.models:
        return page(f"No Gemma 4 entries in {listing.hub} ({listing.region}).")
    return page(
        *(
            line
            for model in listing.models
            for line in (
                f"{model.hub_content_name} {model.version or ''} (default {model.default_instance_type})",
                f"  instances: {', '.join(model.supported_instance_types) or 'not listed'}",
            )
        )
    )


@summary(JumpStartListing)
def jumpstart_summary(listing: JumpStartListing) -> str:
    names = ", ".join(f"{m.hub_content_name} (default {m.default_instance_type})" for m in listing.models)
    return f"{len(listing.models)} Gemma 4 entries in {listing.region}: {names or 'none'}"


def _role_verb(result: RoleResult) -> str:
    if result.dry_run:
        return "would create" if result.created else "would update"
    return "created" if result.created else "updated"


def _json_lines(document: dict[str, Any]) -> list[str]:
    return json.dumps(document, indent=2).splitlines()


@view(RoleResult)
def role_page(result: RoleResult) -> Page:
    """What was (or would be) done, then the inline policy the role carries, as JSON."""
    verb = _role_verb(result)
    return page(
        f"{verb[0].upper()}{verb[1:]} role {result.role_name} {result.role_arn or ''} "
        f"with inline policy {result.policy_name}:",
        *_json_lines(result.policy),
    )


@summary(RoleResult)
def role_summary(result: RoleResult) -> str:
    return f"Role {result.role_name} {_role_verb(result)}: {result.role_arn or '(no ARN yet)'}"


class ImageBuildspec(ImageBuildPlan):
    """An :class:`ImageBuildPlan` shown as its CodeBuild buildspec (``image render --buildspec``): the same
    data and JSON."""


@view(ImageBuildPlan)
def dockerfile_page(plan: ImageBuildPlan) -> Page:
    return page(*plan.dockerfile.splitlines())


@view(ImageBuildspec)
def buildspec_page(plan: ImageBuildPlan) -> Page:
    return page(*plan.buildspec.splitlines())


@summary(ImageBuildPlan)
def image_plan_summary(plan: ImageBuildPlan) -> str:
    return f"{plan.base_image} + the Turing clamp → {plan.target_image}"


@view(ImageBuildResult)
def image_build_page(result: ImageBuildResult) -> Page:
    plan, role = result.plan, result.role
    role_lines: list[str] = []
    if role is not None:
        principals = sorted(
            {statement.get("Principal", {}).get("Service", "?") for statement in role.trust_policy.get("Statement", [])}
        )
        verb = ("would be created" if role.created else "would be updated") if role.dry_run else "in use"
        role_lines = [
            f"Build role: {role.role_name} ({verb}), trusted by {', '.join(principals)}",
            f"Its inline policy {role.policy_name}:",
            *_json_lines(role.policy),
        ]
    return page(
        f"Base image: {plan.base_image} (vLLM {plan.base_vllm_version or 'checked in the build'}, "
        f"CUDA {plan.base_cuda_version or '?'})",
        f"gemmaserve from: {plan.gemmaserve_source}",
        f"Target image: {plan.target_image}",
        *role_lines,
        f"Build: {result.build_id or '(dry run)'} {result.status or ''}".rstrip(),
        Line(f"Deploy with: gemmaserve sagemaker deploy --image {result.image_uri} …", "good")
        if result.image_uri
        else None,
    )


@summary(ImageBuildResult)
def image_build_summary(result: ImageBuildResult) -> str:
    text = f"Target image {result.plan.target_image}: build {result.build_id or '(dry run)'} {result.status or ''}"
    if result.image_uri:
        text += f". Deploy with image={result.image_uri}"
    return text.strip()
