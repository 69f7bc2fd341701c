"""Preflight: each check's verdict and fix, with IAM/SageMaker in moto and Service Quotas stubbed."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gemmaserve.errors import InterlockRefused
from gemmaserve.findings import Status
from gemmaserve.sagemaker import api
from gemmaserve.sagemaker.api import SageMakerSession
from gemmaserve.sagemaker.aws import instances_held, quota_verdict
from gemmaserve.sagemaker.deployment.preflight import (
    PreflightDeps,
    PreflightReport,
    Reachability,
    plan_finding,
    run_preflight,
)
from gemmaserve.sagemaker.spec.container import DEFAULT_AMI, default_image_uri
from gemmaserve.sagemaker.spec.requests import DeployRequest, PreflightRequest
from tests.support.sagemaker.helpers import DERIVED_T4, make_role, record_derived_image

REGION = "us-east-1"
T4_DERIVED = DERIVED_T4


class Factory:
    """moto clients, except Service Quotas (absent from moto for SageMaker): one stubbed client per region."""

    def __init__(self, moto_factory: Any, quotas: dict[str, float], regions: list[str]) -> None:
        self.moto = moto_factory
        self.sq: dict[str, Any] = {}
        self.stubs: list[Stubber] = []
        for region in regions:
            client = boto3.client("service-quotas", region_name=region)
            stub = Stubber(client)
            stub.add_response(
                "list_service_quotas",
                {
                    "Quotas": [
                        {"ServiceCode": "sagemaker", "QuotaName": name, "Value": value}
                        for name, value in quotas.items()
                    ]
                },
                {"ServiceCode": "sagemaker"},
            )
            stub.activate()
            self.sq[region], self.stubs = client, [*self.stubs, stub]

    def __call__(self, service: str, region: str) -> Any:
        return self.sq[region] if service == "service-quotas" else self.moto(service, region)


#: The request fields of the e2b QAT model on one ml.g4dn.xlarge (a T4), the case most checks look at.
E2B_ON_A_T4: dict[str, Any] = {"model": "gemma-4-e2b", "encoding": "qat-w4a16", "instance": ["ml.g4dn.xlarge"]}


def preflight(
    factory: Any, regions: list[str] | None = None, check_model: Any = None, **fields: Any
) -> PreflightReport:
    """run_preflight on the request these fields make, in ``regions`` (default: us-east-1)."""
    regions = regions or [REGION]
    request = PreflightRequest.parse({"regions": regions, **fields})
    return run_preflight(request, PreflightDeps(factory, check_model=check_model), regions=regions)


def by_check(report: PreflightReport) -> dict[str, Any]:
    return {f.check: f for f in report.findings}


def test_t4_with_the_stock_image_fails_on_the_clamp_and_passes_the_rest(moto_factory: Any) -> None:
    role = make_role(moto_factory("iam", REGION))
    factory = Factory(moto_factory, {"ml.g4dn.xlarge for endpoint usage": 1}, [REGION])
    report = preflight(factory, **E2B_ON_A_T4, role_arn=role, check_model=lambda repo: Reachability.GATED)
    checks = by_check(report)
    assert checks["memory-fit:ml.g4dn.xlarge"].status is Status.OK
    assert checks["cuda:ml.g4dn.xlarge"].status is Status.OK  # 12.9 image on the CUDA 13 AMI
    assert checks["turing-clamp"].status is Status.FAIL
    assert "image build" in checks["turing-clamp"].fix
    assert checks["quota:us-east-1:ml.g4dn.xlarge"].status is Status.OK
    assert checks["execution-role"].status is Status.OK
    assert checks["model-id"].status is Status.WARN and "HF_TOKEN" in checks["model-id"].fix
    assert not report.ok and [f.check for f in report.failures()] == ["turing-clamp"]
    # every check is named once with its title, and a per-item one says which item it is about
    assert all(f.title for f in report.findings), [f.check for f in report.findings if not f.title]
    assert (checks["cuda:ml.g4dn.xlarge"].where, checks["quota:us-east-1:ml.g4dn.xlarge"].where) == (
        "ml.g4dn.xlarge",
        REGION,
    )


def test_derived_image_and_held_quota(moto_factory: Any) -> None:
    record_derived_image()
    sm = moto_factory("sagemaker", REGION)
    role = make_role(moto_factory("iam", REGION))
    # An existing endpoint already holds the only ml.g4dn.xlarge of the quota.
    sm.create_model(ModelName="m", ExecutionRoleArn=role, PrimaryContainer={"Image": "x"})
    sm.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": "m", "InitialInstanceCount": 1, "InstanceType": "ml.g4dn.xlarge"}
        ],
    )
    sm.create_endpoint(EndpointName="busy", EndpointConfigName="c")
    assert instances_held(sm, region=REGION) == {"ml.g4dn.xlarge": 1}
    factory = Factory(moto_factory, {"ml.g4dn.xlarge for endpoint usage": 1}, [REGION])
    report = preflight(
        factory,
        **E2B_ON_A_T4,
        role_arn=role,
        image=T4_DERIVED.replace("us-east-1", "{region}"),
        check_model=lambda repo: Reachability.REACHABLE,
    )
    checks = by_check(report)
    assert checks["turing-clamp"].status is Status.OK
    quota = checks["quota:us-east-1:ml.g4dn.xlarge"]
    assert quota.status is Status.FAIL and "held by endpoints 1" in quota.detail
    assert checks["cuda:ml.g4dn.xlarge"].status is Status.OK


def test_missing_role_unknown_model_and_missing_quota_are_not_ok(moto_factory: Any) -> None:
    factory = Factory(moto_factory, {}, [REGION])
    report = preflight(
        factory,
        model="gemma-4-e2b",
        encoding="bf16",
        instance=["ml.g6.xlarge"],
        role_arn="arn:aws:iam::123456789012:role/nope",
    )
    checks = by_check(report)
    assert checks["execution-role"].status is Status.FAIL
    assert checks["model-id"].status is Status.UNKNOWN  # offline: unknown, never ok
    assert checks["quota:us-east-1:ml.g6.xlarge"].status is Status.UNKNOWN
    assert "turing-clamp" not in checks  # L4 needs no clamp
    assert not report.ok
    assert {f.check for f in report.failures(accept_unknown=True)} == {"execution-role"}


@pytest.mark.parametrize(
    ("quotas", "model", "unknown", "where"),
    [
        # the Hub cannot be asked: a finding about every region
        ({"ml.g6.xlarge for endpoint usage": 1}, None, "model-id", None),
        # the quota cannot be read in the only region tried: a finding about that region
        ({}, Reachability.REACHABLE, "quota:us-east-1:ml.g6.xlarge", REGION),
    ],
)
def test_an_unknown_finding_blocks_the_deploy_and_creates_nothing(
    moto_factory: Any, quotas: dict[str, float], model: Reachability | None, unknown: str, where: str | None
) -> None:
    """Fail closed: a check that could not be made refuses the deploy unless the person accepts unknowns."""
    role = make_role(moto_factory("iam", REGION))
    factory = Factory(moto_factory, quotas, [REGION])
    request = DeployRequest(
        model="gemma-4-e2b",
        encoding="qat-w4a16",
        instance=["ml.g6.xlarge"],
        regions=[REGION],
        role_arn=role,
        endpoint_name="unknown-blocks",
        list_prices=True,
    )
    with pytest.raises(InterlockRefused) as refused:
        api.deploy(
            request, SageMakerSession(factory=factory, check_model=None if model is None else (lambda repo: model))
        )
    reasons = refused.value.fields["reasons"]
    assert [(r["check"], r["status"], r["where"]) for r in reasons] == [(unknown, "unknown", where)]
    assert "Preflight found problems" in refused.value.message
    assert "--accept-unknown" in (refused.value.hint or "")  # the person's way past a check they made themselves
    assert moto_factory("sagemaker", REGION).list_models()["Models"] == []


def test_cuda_13_image_on_g4dn_without_the_new_ami_fails(moto_factory: Any) -> None:
    factory = Factory(moto_factory, {}, [REGION])
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm:0.34-gpu-py312-cu130-turing"
    # an AMI of CUDA 12.2 under an image built for CUDA 13.0
    report = preflight(
        factory, model="gemma-4-e2b", encoding="qat-w4a16", instance=["ml.g4dn.xlarge"], image=image,
        ami="al2-ami-sagemaker-inference-gpu-2",
    )  # fmt: skip
    finding = by_check(report)["cuda:ml.g4dn.xlarge"]
    assert finding.status is Status.FAIL and DEFAULT_AMI in finding.fix


def test_host_ram_is_hard_on_sagemaker() -> None:
    # A plan that fits only with swap cannot run on a SageMaker host: there is no swap to add.
    from gemmaserve.plan import plan_deployment

    fits = plan_deployment("gemma-4-e2b", "qat-w4a16", "l4")
    swap = fits.model_copy(update={"verdict": "fits-with-swap", "binding_term": "host RAM: loading needs 18 GiB",
                                   "host_ram_gib": 16.0})  # fmt: skip
    finding = plan_finding(swap, "ml.g4dn.xlarge")
    assert finding.status is Status.FAIL and "no swap" in finding.detail
    assert plan_finding(fits.model_copy(update={"host_ram_gib": 16.0}), "ml.g6.xlarge").status is Status.OK
    short = fits.model_copy(update={"verdict": "does-not-fit", "binding_term": "GPU memory"})
    assert plan_finding(short, "ml.g4dn.xlarge").status is Status.FAIL


def test_mixed_gpus_in_a_pool_fail(moto_factory: Any) -> None:
    factory = Factory(moto_factory, {}, [REGION])
    report = preflight(factory, model="gemma-4-e2b", encoding="qat-w4a16", instance=["ml.g6.xlarge", "ml.g4dn.xlarge"])
    assert by_check(report)["one-gpu"].status is Status.FAIL


@pytest.mark.parametrize(
    ("limit", "used", "needed", "expected"),
    [(2, 1, 1, True), (1, 1, 1, False), (None, 0, 1, None), (3, None, 1, None), (0, 0, 1, False)],
)
def test_quota_verdict(limit: float | None, used: int | None, needed: int, expected: bool | None) -> None:
    assert quota_verdict(limit, used, needed) is expected


def test_default_image_is_regional() -> None:
    assert (
        default_image_uri("eu-west-1") == "763104351884.dkr.ecr.eu-west-1.amazonaws.com/vllm:server-sagemaker-cuda-v2.3"
    )


def test_the_preflight_command_a_refusal_names_runs_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    from gemmaserve.sagemaker.api import _preflight_command
    from tests.support.sagemaker.helpers import run

    image = "123456789012.dkr.ecr.{region}.amazonaws.com/team/gemma:v1"
    request = DeployRequest(
        model="gemma-4-e4b", encoding="bf16", instance=["ml.g6.xlarge"], image=image, dry_run=True,
        role_arn="arn:aws:iam::123456789012:role/gemmaserve-endpoint",
    )  # fmt: skip
    command = _preflight_command(request, [REGION, "us-west-2"])
    words = shlex.split(command)
    assert words[words.index("--image") + 1] == image and "--role-arn" in words
    code, _, err = run(words[1:], capsys)
    assert code != 2, err  # every option exists and every value parses (no credentials here: exit 1)


def test_preflight_says_each_check_as_it_starts_with_an_eta_from_the_pace_so_far(moto_factory: Any) -> None:
    """A refused deploy --yes took 22 s in silence: each AWS check is named as it starts, with what is left."""
    regions = [REGION, "us-west-2"]
    factory = Factory(moto_factory, {"ml.g6.xlarge for endpoint usage": 1}, regions)
    ticks = iter([0.0, 0.0, 4.0, 8.0, 12.0, 16.0])  # each check takes 4 s on this clock
    events: list[Any] = []
    request = PreflightRequest.parse(
        {"model": "gemma-4-e2b", "encoding": "bf16", "instance": ["ml.g6.xlarge"], "regions": regions,
         "role_arn": "arn:aws:iam::123456789012:role/nope"}
    )  # fmt: skip
    run_preflight(request, PreflightDeps(factory, progress=events.append, clock=lambda: next(ticks)), regions=regions)
    messages = [event.message for event in events]
    assert [event.phase for event in events] == ["preflight"] * 4
    assert [(event.done, event.total) for event in events] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert messages[0] == f"Checking quotas in {REGION} (check 1 of 4)"  # no pace yet: no guess
    assert messages[1] == "Checking quotas in us-west-2 (check 2 of 4, about 12 s left)"
    assert messages[2] == "Checking the execution role (check 3 of 4, about 8 s left)"
    assert messages[3] == "Checking the model on the Hugging Face Hub (check 4 of 4, about 4 s left)"


def test_a_refused_deploy_reports_its_checks_before_the_refusal(moto_factory: Any) -> None:
    factory = Factory(moto_factory, {}, [REGION])
    request = DeployRequest(
        model="gemma-4-e2b",
        encoding="qat-w4a16",
        instance=["ml.g6.xlarge"],
        regions=[REGION],
        role_arn="arn:aws:iam::123456789012:role/nope",
        endpoint_name="refused-with-progress",
        list_prices=True,
    )
    events: list[Any] = []
    with pytest.raises(InterlockRefused):
        api.deploy(request, SageMakerSession(factory=factory, check_model=None, progress=events.append))
    said = [event.message for event in events if event.phase == "preflight"]
    assert [message.split(" (")[0] for message in said] == [
        f"Checking quotas in {REGION}",
        "Checking the execution role",
        "Checking the model on the Hugging Face Hub",
    ]
