"""Preflight: will this deploy work, before SageMaker bills a minute? One typed report, each finding with its fix.

Checks: the plan's memory fit per instance type (host RAM is hard: no swap on a
SageMaker host), one GPU across the pool, image CUDA against the host AMI, the
Turing clamp on T4, endpoint quota per region, the execution role, and the model
id's reachability. Unknown is never ok: the report passes only when every finding is ok or warn.
Findings are :class:`gemmaserve.findings.Finding`; one about a single region names it in ``where``, one
with no ``where`` is about every region (deploy refuses on any of those, but on regional ones only when
every region tried has one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gemmaserve.catalog import resolve_gpu
from gemmaserve.errors import AwsAccessDenied, AwsError, CredentialsMissing, GemmaserveError
from gemmaserve.findings import Finding, Status, all_pass
from gemmaserve.progress import ProgressCallback, StepPace
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import ClientFactory, call, check_quotas, is_not_found
from gemmaserve.sagemaker.spec import checks
from gemmaserve.sagemaker.spec.container import (
    CudaVerdict,
    ami_for_cuda,
    cuda_verdict,
    host_cuda_version,
    image_claims_turing_clamp,
    image_cuda_version,
    image_for_region,
    image_region,
)

if TYPE_CHECKING:
    from gemmaserve.catalog import Instance
    from gemmaserve.plan import PlanRow
    from gemmaserve.sagemaker.spec.requests import DeploymentSettings

# Instances of the variant a deploy creates (InitialInstanceCount): quota is counted in instances, whatever
# their GPUs.
INSTANCE_COUNT = 1


class Reachability(StrEnum):
    REACHABLE = "reachable"
    GATED = "gated"  # exists; the container needs HF_TOKEN
    MISSING = "missing"
    UNKNOWN = "unknown"


ModelChecker = Callable[[str], Reachability]


class PreflightReport(ActionResult):
    model: str
    encoding: str
    repo_id: str | None
    instance_types: list[str]
    regions: list[str]
    image_uri: str | None
    findings: list[Finding]

    def succeeded(self) -> bool:
        """Every finding passed (ok or warn): a failed or unknown one makes the report not ok."""
        return all_pass(self.findings)

    def failures(self, *, accept_unknown: bool = False) -> list[Finding]:
        """The findings that block a deploy; ``accept_unknown`` lets the unchecked ones through."""
        return [f for f in self.findings if f.blocks and not (accept_unknown and f.status is Status.UNKNOWN)]


@dataclass(frozen=True)
class PreflightDeps:
    """What preflight reads AWS and the Hub through, and how it reports its steps (tests pass moto's
    clients, a scripted clock)."""

    factory: ClientFactory
    check_model: ModelChecker | None = None
    progress: ProgressCallback | None = None
    clock: Callable[[], float] = time.monotonic


def run_preflight(
    settings: DeploymentSettings,
    deps: PreflightDeps,
    *,
    regions: list[str],
    rows: Mapping[str, PlanRow] | None = None,
) -> PreflightReport:
    """Run every check of a deploy with ``settings`` in ``regions``; AWS failures become findings (unknown),
    never exceptions, except bad usage and missing credentials (:class:`CredentialsMissing`: then nothing in
    AWS can be checked). Each check that asks AWS or the Hub is named on ``deps.progress`` as it starts,
    with an ETA from the pace so far (a refused deploy spent 22 s here in silence)."""
    report = run_offline_preflight(settings, regions=regions, rows=rows)
    findings = report.findings
    remote_clamp = [
        index
        for index, finding in enumerate(findings)
        if finding.check == "turing-clamp" and finding.status is Status.UNKNOWN and report.image_uri
    ]
    pace = StepPace(len(remote_clamp) + len(regions) + 2, "preflight", deps.progress, clock=deps.clock)
    for index in remote_clamp:
        pace.begin("Reading the image's build record")
        findings[index] = _remote_clamp_finding(deps.factory, report.image_uri or "", findings[index])
    for region in regions:
        pace.begin(f"Checking quotas in {region}")
        findings.extend(_quota_findings(deps.factory, settings.instance, INSTANCE_COUNT, region))
    pace.begin("Checking the execution role")
    findings.extend(role_findings(deps.factory, settings.role_arn, regions, settings.image))
    pace.begin("Checking the model on the Hugging Face Hub")
    findings.append(_model_finding(report.repo_id or "", deps.check_model))
    return report


def run_offline_preflight(
    settings: DeploymentSettings, *, regions: list[str], rows: Mapping[str, PlanRow] | None = None
) -> PreflightReport:
    """The checks that need no AWS call: memory fit per type (per rank where the model is split over the
    instance's GPUs), one GPU per pool, CUDA vs AMI, the Turing clamp.

    ``rows`` are the plan of each instance type, when the caller planned already (deploy hands its plan
    down rather than have it computed twice); otherwise :meth:`DeploymentSettings.plan_rows` plans them.
    """
    from gemmaserve.catalog import resolve_encoding, resolve_instance, resolve_model
    from gemmaserve.errors import UnknownName

    model_obj = resolve_model(settings.model)
    checkpoint = resolve_encoding(model_obj, settings.encoding)
    planned = dict(rows) if rows is not None else settings.plan_rows()
    findings: list[Finding] = []
    needs_clamp = False
    gpus = set()
    for name in settings.instance:
        try:
            instance = resolve_instance(name)
        except UnknownName:
            detail = (
                f"{name} is not in gemmaserve's catalog: its GPU and host RAM are unknown, so no plan can say the "
                "model fits."
            )
            fix = "Use a catalog instance type (gemmaserve plan lists them)."
            findings.append(checks.MEMORY_FIT.at(name).fail(detail, fix=fix))
            continue
        gpus.add(instance.gpu)
        row = planned[name] if name in planned else settings.plan_rows()[name]
        needs_clamp = needs_clamp or row.needs_turing_clamp
        finding = plan_finding(row, instance.key)
        if row.verdict == "does-not-fit":
            finding = _with_a_split_that_fits(finding, settings, instance)
        findings.append(finding)
    if len(gpus) > 1:
        detail = f"The pool mixes GPUs {sorted(gpus)}; one plan cannot fit all of them."
        findings.append(checks.ONE_GPU.fail(detail, fix="List only instance types with the same GPU in --instance."))
    image = image_for_region(settings.image, regions[0])
    findings.extend(_cuda_findings(image, settings.instance, settings.ami))
    if needs_clamp:
        findings.append(_clamp_finding(image, None))
    return PreflightReport(
        model=model_obj.key,
        encoding=checkpoint.key,
        repo_id=checkpoint.repo_id,
        instance_types=settings.instance,
        regions=regions,
        image_uri=image,
        findings=findings,
    )


def rank_memory(row: PlanRow) -> str:
    """One rank's GPU memory as the plan counts it: weights + engine + KV cache within the requested share."""
    gpu = resolve_gpu(row.gpu)
    return (
        f"per GPU (1 of {row.tensor_parallel_size} × {gpu.name}): weights {row.weights_gib:g} GiB + engine {row.engine_overhead_gib:g} GiB + KV cache "
        f"{row.kv_budget_gib:g} GiB of {row.gpu_memory_utilization:g} × {gpu.visible_memory_gib:g} GiB"
    )


def _with_a_split_that_fits(finding: Finding, settings: DeploymentSettings, instance: Instance) -> Finding:
    """A memory-fit failure's fix names the cheapest SageMaker type of the same GPU with more of them on
    which the model, split over all of its GPUs, fits (the plan's smallest split that does), if one does."""
    from gemmaserve.catalog import load_catalog
    from gemmaserve.errors import UsageError

    larger = sorted(
        (
            other
            for other in load_catalog().instances.values()
            if other.platform == "sagemaker" and other.gpu == instance.gpu and other.gpu_count > instance.gpu_count
        ),
        key=lambda other: (other.price_usd_per_hour or float("inf"), other.gpu_count),
    )
    for other in larger:
        there = settings.model_copy(update={"instance": [other.key], "tensor_parallel_size": None})
        try:
            row = there.plan_rows()[other.key]
        except UsageError:
            continue
        if row.verdict == "fits":
            price = f", ${other.price_usd_per_hour:.3f}/hour" if other.price_usd_per_hour else ""
            fix = (
                f"Split it over {other.gpu_count} GPUs: --instance {other.key} --tensor-parallel-size "
                f"{other.gpu_count} fits per GPU ({other.gpu_count} × {resolve_gpu(other.gpu).name}{price})."
            )
            return finding.model_copy(update={"fix": fix})
    return finding


def plan_finding(row: PlanRow, instance: str) -> Finding:
    """The memory-fit finding of one instance type's plan (host RAM is hard: a SageMaker host has no swap)."""
    split = f" over {row.tensor_parallel_size} GPUs" if row.tensor_parallel_size > 1 else ""
    per_rank = " per GPU" if row.tensor_parallel_size > 1 else ""
    memory = f"{rank_memory(row)}; " if row.tensor_parallel_size > 1 else ""
    detail = (
        f"{instance}: {row.verdict}{split}; {memory}KV cache {row.kv_cache_tokens:,} tokens{per_rank}, "
        f"max concurrency {row.max_concurrency:g}x; loading needs {row.host_ram_needed_gib:g} GiB host RAM of "
        f"{row.host_ram_gib:g}"
        if row.host_ram_gib
        else f"{instance}: {row.verdict}"
    )
    check = checks.MEMORY_FIT.at(instance)
    if row.verdict == "fits":
        return check.ok(detail)
    if row.verdict == "fits-with-swap":
        return check.fail(
            f"{detail}. {row.binding_term}. A SageMaker host has no swap to add.",
            fix="Pick a larger host of the same GPU (e.g. the 2xlarge) or a 4-bit encoding.",
        )
    return check.fail(
        f"{detail}: {row.binding_term}",
        fix="See `gemmaserve plan` for a model/encoding/GPU that fits (--tensor-parallel-size N for several GPUs).",
    )


def _cuda_findings(image: str, instance_types: list[str], ami: str | None) -> list[Finding]:
    image_cuda = image_cuda_version(image)
    findings = []
    for instance_type in instance_types:
        host = host_cuda_version(instance_type, ami)
        verdict = cuda_verdict(image_cuda, host)
        label = f"image CUDA {_v(image_cuda)} on {instance_type} with AMI {ami or 'default'} (CUDA {_v(host)})"
        fix = f"Set InferenceAmiVersion={ami_for_cuda(image_cuda)} (deploy --ami)."
        check = checks.CUDA.at(instance_type)
        if verdict is CudaVerdict.OK:
            findings.append(check.ok(label))
        elif verdict is CudaVerdict.MINOR_NEWER:
            findings.append(check.warn(label + ": runs through CUDA minor-version compatibility (no PTX JIT)", fix=fix))
        elif verdict is CudaVerdict.TOO_NEW:
            detail = label + ": the driver is too old; SageMaker reports CannotStartContainerError with no log group"
            findings.append(check.fail(detail, fix=fix))
        else:
            fix = "Use an image tag that names its CUDA (cu129, cu130) or the pinned default."
            findings.append(check.unknown(label, fix=fix))
    return findings


def _clamp_finding(image: str, labels: dict[str, str] | None) -> Finding:
    from gemmaserve.sagemaker.image.dockerfile import find_record

    record = find_record(image) if labels is None else None
    claims = image_claims_turing_clamp(image, labels, record.clamp_verified if record else None)
    if claims is True:
        how = (
            f"build {record.build_id} of {record.built_at:%Y-%m-%d} verified it on base {record.base_image}"
            if record
            else "its label says so"
        )
        return checks.TURING_CLAMP.ok(f"{image} carries the Turing clamp ({how}).")
    fix = "Build the derived image: gemmaserve sagemaker image build --region … ; then deploy --image <its URI>."
    if claims is False:
        detail = (
            f"{image} is stock vLLM: Gemma 4's head-512 attention tile needs 98,304 bytes of shared memory, a T4 "
            "allows 65,536 (OutOfResources)."
        )
        return checks.TURING_CLAMP.fail(detail, fix=fix)
    detail = (
        f"No build record of {image} on this host, so nothing says it carries the Turing clamp (a tag's text "
        "proves nothing)."
    )
    return checks.TURING_CLAMP.unknown(detail, fix=fix + " Or deploy from the host that built it.")


def _remote_clamp_finding(factory: ClientFactory, image: str, local: Finding) -> Finding:
    """No record on this host: the one the build wrote to the account's build bucket decides."""
    from gemmaserve.sagemaker.image.dockerfile import fetch_remote_record, record_location

    if image_region(image) is None:
        return local  # not an ECR image: no build of ours made it
    try:
        record = fetch_remote_record(factory("s3", image_region(image) or ""), image)
    except AwsError as error:
        return local.model_copy(
            update={
                "detail": local.detail + f" Its build record at {record_location(image)} "
                f"could not be read: {error.message}"
            }
        )
    if record is None or not record.clamp_verified:
        return local.model_copy(update={"detail": local.detail + f" No build record at {record_location(image)}."})
    return checks.TURING_CLAMP.ok(
        f"{image} carries the Turing clamp (build {record.build_id} verified it; vLLM "
        f"{record.base_vllm_version}, CUDA {record.base_cuda_version}; {record_location(image)})."
    )


def _quota_findings(factory: ClientFactory, types: list[str], count: int, region: str) -> list[Finding]:
    try:
        quotas = check_quotas(
            factory("service-quotas", region), factory("sagemaker", region), types, count, region=region
        )
    except CredentialsMissing:
        raise  # no check that needs AWS can run: one error with the fix, not a list of unknowns
    except AwsAccessDenied as error:
        allow = "Allow servicequotas:ListServiceQuotas, sagemaker:ListEndpoints/DescribeEndpoint*."
        return [checks.QUOTA.at(region).unknown(error.message, fix=allow)]
    except AwsError as error:
        return [checks.QUOTA.at(region).unknown(error.message)]
    findings = []
    for quota in quotas:
        detail = (
            f"{quota.quota_name}: limit {quota.limit if quota.limit is not None else '?'}, "
            f"held by endpoints {quota.used}, this deploy needs {quota.needed}"
        )
        status = {True: Status.OK, False: Status.FAIL, None: Status.UNKNOWN}[quota.ok]
        fix = (
            None
            if quota.ok
            else (
                f"Request an increase of '{quota.quota_name}' in Service Quotas ({region}), "
                "delete an endpoint that holds it, or try another region."
            )
        )
        per_type = replace(checks.QUOTA.at(region), check=f"quota:{region}:{quota.instance_type}")
        findings.append(per_type.finding(status, detail, fix=fix))
    return findings


def role_findings(
    factory: ClientFactory, role_arn: str | None, regions: list[str], image_uri: str | None
) -> list[Finding]:
    """The role exists, is in the caller's account, trusts SageMaker, and (ours) works in every region tried."""
    from gemmaserve.sagemaker.image.iam import (
        EXECUTION_POLICY_NAME,
        ecr_repository_arn,
        log_group_arns,
        read_inline_policy,
        role_account,
        statement_resources,
    )

    # a custom image must be named, or the role made by following the fix would still not pull it
    image_option = f" --image {image_uri}" if image_uri else ""
    fix = "Create a least-privilege one: gemmaserve sagemaker role create --regions " + ",".join(regions) + image_option

    def role_check(status: Status, detail: str, remedy: str | None = None) -> Finding:
        return checks.EXECUTION_ROLE.finding(status, detail, fix=remedy)

    if not role_arn:
        return [role_check(Status.FAIL, "No execution role given.", fix)]
    region = regions[0]
    arn_account = role_account(role_arn)
    try:
        caller = call(region, factory("sts", region).get_caller_identity)["Account"]
    except AwsError as error:
        return [role_check(Status.UNKNOWN, f"Cannot read the caller's account: {error.message}")]
    if caller != arn_account:
        return [
            role_check(
                Status.FAIL,
                f"{role_arn} is in account {arn_account}, but these credentials are account {caller}: "
                "SageMaker cannot pass a role of another account.",
                fix,
            )
        ]
    name = role_arn.rsplit("/", 1)[-1]
    iam = factory("iam", region)
    try:
        described = call(region, iam.get_role, RoleName=name)["Role"]
    except AwsError as error:
        status = Status.FAIL if is_not_found(error) else Status.UNKNOWN
        return [role_check(status, f"Role {name}: {error.message}", fix)]
    document = described.get("AssumeRolePolicyDocument", {})
    if isinstance(document, str):
        from urllib.parse import unquote

        document = json.loads(unquote(document))
    if not _trusts_sagemaker(document):
        return [role_check(Status.FAIL, f"{described['Arn']} cannot be assumed by sagemaker.amazonaws.com.", fix)]
    findings = [role_check(Status.OK, f"{described['Arn']} is in this account and trusts sagemaker.")]
    try:
        policy = read_inline_policy(iam, name, EXECUTION_POLICY_NAME, region=region)
    except AwsError as error:
        return [*findings, checks.ROLE_REGIONS.unknown(f"Cannot read {name}'s policy: {error.message}")]
    if policy is None:
        detail = (
            f"{name} has no {EXECUTION_POLICY_NAME} policy, so gemmaserve cannot tell whether it may pull the "
            f"image and write logs in {', '.join(regions)}."
        )
        return [*findings, checks.ROLE_REGIONS.warn(detail, fix=fix)]
    logs, pulls = set(statement_resources(policy, "EndpointLogs")), set(statement_resources(policy, "EcrPull"))
    missing = []
    for candidate in regions:
        image = image_for_region(image_uri, candidate)
        try:
            repository = ecr_repository_arn(image)
        except GemmaserveError:
            repository = None  # not an ECR image: nothing to pull-check
        if not set(log_group_arns(candidate, arn_account)) <= logs or (repository and repository not in pulls):
            missing.append(candidate)
    everywhere = (
        f"Make the role usable there too (earlier regions are kept): gemmaserve sagemaker role create --name "
        f"{name} --regions {','.join(regions)}{image_option}"
    )
    findings.extend(
        checks.ROLE_REGIONS.at(candidate).fail(
            f"{name} cannot pull the image or write endpoint logs in {candidate}: a deploy there would fail.",
            fix=everywhere,
        )
        for candidate in missing
    )
    working = [candidate for candidate in regions if candidate not in missing]
    if working:
        findings.append(checks.ROLE_REGIONS.ok(f"{name} works in {', '.join(working)}."))
    return findings


def _trusts_sagemaker(document: dict[str, Any]) -> bool:
    statements = document.get("Statement", [])
    for statement in statements if isinstance(statements, list) else [statements]:
        services = statement.get("Principal", {}).get("Service", [])
        services = [services] if isinstance(services, str) else services
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if (
            statement.get("Effect") == "Allow"
            and "sagemaker.amazonaws.com" in services
            and any(a in ("sts:AssumeRole", "sts:*", "*") for a in actions)
        ):
            return True
    return False


# What each answer of the model checker makes of the model-id check: status, detail ({repo_id}), fix.
_MODEL_FINDINGS: dict[Reachability, tuple[Status, str, str | None]] = {
    Reachability.REACHABLE: (Status.OK, "{repo_id} is on the Hugging Face Hub.", None),
    Reachability.GATED: (
        Status.WARN,
        "{repo_id} is gated.",
        "Pass a token the container can use: deploy --env HF_TOKEN=…",
    ),
    Reachability.MISSING: (
        Status.FAIL,
        "{repo_id} was not found on the Hub.",
        "Check the repository id, or serve from S3.",
    ),
    Reachability.UNKNOWN: (
        Status.UNKNOWN,
        "Could not check {repo_id} (offline or no checker).",
        "Run preflight with network.",
    ),
}


def _model_finding(repo_id: str, check_model: ModelChecker | None) -> Finding:
    result = Reachability.UNKNOWN
    if check_model is not None:
        try:
            result = check_model(repo_id)
        except GemmaserveError:
            result = Reachability.UNKNOWN
    status, detail, fix = _MODEL_FINDINGS.get(result, _MODEL_FINDINGS[Reachability.UNKNOWN])
    return checks.MODEL_ID.finding(status, detail.format(repo_id=repo_id), fix=fix)


def hub_reachability(repo_id: str) -> Reachability:
    """The Hub's answer for ``repo_id`` (HF_HUB_OFFLINE or no network → unknown)."""
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import (
            GatedRepoError,
            OfflineModeIsEnabled,
            RepositoryNotFoundError,
        )
    except ImportError:
        return Reachability.UNKNOWN
    try:
        HfApi().model_info(repo_id, timeout=10)
    except GatedRepoError:
        return Reachability.GATED
    except RepositoryNotFoundError:
        return Reachability.MISSING
    except (OfflineModeIsEnabled, Exception):
        return Reachability.UNKNOWN
    return Reachability.REACHABLE


def _v(version: tuple[int, int] | None) -> str:
    return "?" if version is None else f"{version[0]}.{version[1]}"
