"""A model split over the GPUs of one SageMaker instance: the container's setting, the GPU count, quota, memory.

Deploys and preflights run the real CLI (errors mapped to exit codes) against moto's server, with Service
Quotas answered by :mod:`tests.support.sagemaker.service_quotas_fake` in front of it (moto has no ListServiceQuotas).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gemmaserve.catalog import load_catalog, resolve_instance
from gemmaserve.findings import Status
from gemmaserve.plan import plan_deployment
from gemmaserve.sagemaker.deployment.preflight import PreflightDeps, Reachability, run_offline_preflight, run_preflight
from gemmaserve.sagemaker.spec.container import TENSOR_PARALLEL_ENV, env_to_serve_args
from gemmaserve.sagemaker.spec.requests import DeployRequest, PreflightRequest
from tests.support.sagemaker.helpers import make_role, run
from tests.support.sagemaker.service_quotas_fake import service_quotas_fake

REGION = "us-east-1"
DRY = ["sagemaker", "deploy", "--region", REGION, "--dry-run", "--list-prices"]
BIG = ["--model", "31b", "--encoding", "bf16"]
MULTI_GPU_TYPES = [
    "ml.g4dn.12xlarge", "ml.g5.12xlarge", "ml.g5.48xlarge", "ml.g6.12xlarge", "ml.g6.48xlarge",
    "ml.g6e.12xlarge", "ml.g6e.24xlarge", "ml.g6e.48xlarge",
]  # fmt: skip


def create_model_environment(out: str) -> dict[str, str]:
    outcome = json.loads(out)
    create_model = next(call for call in outcome["plan"]["calls"] if call["operation"] == "CreateModel")
    return dict(create_model["params"]["PrimaryContainer"]["Environment"])


def test_every_multi_gpu_type_is_a_real_time_hosting_type_with_a_price() -> None:
    """The types offered are those CreateEndpointConfig accepts (botocore's ProductionVariantInstanceType)."""
    from gemmaserve.sagemaker.spec.inputs import validate_instance_types

    catalog = load_catalog().instances
    sagemaker_multi = sorted(k for k, i in catalog.items() if i.platform == "sagemaker" and i.gpu_count > 1)
    assert set(MULTI_GPU_TYPES) <= set(sagemaker_multi)
    assert validate_instance_types(MULTI_GPU_TYPES[:5]) and validate_instance_types(MULTI_GPU_TYPES[5:])
    for name in MULTI_GPU_TYPES:
        assert resolve_instance(name).price is not None, name


def test_dry_run_on_g6e_12xlarge_shows_the_split_per_gpu_memory_and_price(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*DRY, *BIG, "--instance", "ml.g6e.12xlarge", "--tensor-parallel-size", "4"]
    code, out, err = run(args, capsys)
    assert code == 0, err
    price = resolve_instance("ml.g6e.12xlarge").price
    assert price is not None
    assert f"on ml.g6e.12xlarge at ${price.usd_per_hour:.3f}/hour" in out
    assert "--tensor-parallel-size 4" in out  # what the container runs
    assert f'"{TENSOR_PARALLEL_ENV}": "4"' in out  # in CreateModel's environment
    fit = next(line for line in out.splitlines() if "memory-fit:ml.g6e.12xlarge" in line)
    assert fit.split()[0] == "ok" and "fits over 4 GPUs" in fit and "per GPU (1 of 4 × NVIDIA L40S)" in fit

    code, out, err = run([*args, "--json"], capsys)
    assert code == 0, err
    env = create_model_environment(out)
    assert env[TENSOR_PARALLEL_ENV] == "4"
    serve_args = env_to_serve_args(env)  # what the image's entrypoint makes of it
    assert serve_args[serve_args.index("--tensor-parallel-size") + 1] == "4"
    assert json.loads(out)["plan"]["usd_per_hour"] == price.usd_per_hour


def test_the_split_defaults_to_the_instance_s_gpus_and_one_gpu_sets_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*DRY, *BIG, "--instance", "ml.g6e.48xlarge", "--json"], capsys)
    assert code == 0, err
    assert create_model_environment(out)[TENSOR_PARALLEL_ENV] == "8"
    code, out, err = run([*DRY, "--model", "e2b", "--instance", "ml.g6e.xlarge", "--json"], capsys)
    assert code == 0, err
    assert TENSOR_PARALLEL_ENV not in create_model_environment(out)


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["--instance", "ml.g6e.12xlarge", "--tensor-parallel-size", "2"],
         ["--tensor-parallel-size 2 does not match ml.g6e.12xlarge's 4 GPU(s)", "2 billed and idle",
          "Use --tensor-parallel-size 4"]),
        (["--instance", "ml.g6e.12xlarge", "--tensor-parallel-size", "8"],
         ["vLLM refuses to start 8 ranks on 4", "ml.g6e.48xlarge"]),
        (["--instance", "ml.g6e.xlarge", "--tensor-parallel-size", "4"],
         ["ml.g6e.xlarge's 1 GPU(s)", "ml.g6e.12xlarge, ml.g6e.24xlarge"]),
        (["--instance", "ml.g5.12xlarge", "--tensor-parallel-size", "1"], ["3 billed and idle"]),
        (["--instance", "ml.g6e.12xlarge", "--instance", "ml.g6e.48xlarge"],
         ["mixes GPU counts: ml.g6e.12xlarge (4), ml.g6e.48xlarge (8)"]),
        (["--instance", "ml.g6e.12xlarge", "--env", f"{TENSOR_PARALLEL_ENV}=2"],
         [f"{TENSOR_PARALLEL_ENV}='2'", "splits the model over 4 GPU(s)", "Give --tensor-parallel-size"]),
        (["--instance", "ml.g6e.12xlarge", "--vllm-arg=--tensor-parallel-size=2"], ["splits the model over 4 GPU(s)"]),
    ],
)  # fmt: skip
def test_a_split_that_is_not_the_instance_s_gpu_count_is_bad_usage(
    aws_env: Any, capsys: pytest.CaptureFixture[str], extra: list[str], needles: list[str]
) -> None:
    """Refused with exit 2 and the fix, before any AWS call: nothing is created, even without --dry-run."""
    role = make_role(aws_env("iam", REGION))
    args = ["sagemaker", "deploy", "--region", REGION, *BIG, "--role-arn", role, "--yes", *extra]
    code, out, err = run(args, capsys)
    assert code == 2, (out, err)
    assert err.startswith("Error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    assert aws_env("sagemaker", REGION).list_models()["Models"] == []


def test_the_request_refuses_the_mismatch_for_both_front_ends() -> None:
    from gemmaserve.errors import UsageError

    fields = {"model": "31b", "encoding": "bf16", "instance": ["ml.g6e.12xlarge"], "region": REGION}
    assert PreflightRequest.parse(fields).tensor_parallel() == 4
    assert DeployRequest.parse({**fields, "dry_run": True, "tensor_parallel_size": 4}).tensor_parallel() == 4
    with pytest.raises(UsageError, match="does not match"):
        PreflightRequest.parse({**fields, "tensor_parallel_size": 2})


def test_31b_bf16_fits_per_gpu_on_four_l40s_but_not_on_one() -> None:
    """The verdict is one rank's memory from the plan (gemmaserve.tensor_parallel), per instance type."""
    fields = {"model": "31b", "encoding": "bf16", "region": REGION}
    four = PreflightRequest.parse({**fields, "instance": ["ml.g6e.12xlarge"], "tensor_parallel_size": 4})
    one = PreflightRequest.parse({**fields, "instance": ["ml.g6e.2xlarge"], "tensor_parallel_size": 1})
    split = {f.check: f for f in run_offline_preflight(four, regions=[REGION]).findings}["memory-fit:ml.g6e.12xlarge"]
    whole = {f.check: f for f in run_offline_preflight(one, regions=[REGION]).findings}["memory-fit:ml.g6e.2xlarge"]
    assert split.status is Status.OK and whole.status is Status.FAIL
    assert "GPU memory" in whole.detail
    # the fix is the cheapest type of the same GPU on which the split fits
    assert "Split it over 4 GPUs: --instance ml.g6e.12xlarge --tensor-parallel-size 4" in (whole.fix or "")
    # the figures shown are the plan's rank figures, not the whole model's
    rank = plan_deployment("31b", "bf16", instance=resolve_instance("ml.g6e.12xlarge"), tensor_parallel_size=4)
    single = plan_deployment("31b", "bf16", instance=resolve_instance("ml.g6e.2xlarge"))
    assert f"weights {rank.weights_gib:g} GiB" in split.detail
    assert f"KV cache {rank.kv_cache_tokens:,} tokens per GPU" in split.detail
    assert rank.weights_gib < single.weights_gib / 2 and rank.kv_cache_tokens > 0 and single.kv_cache_tokens == 0


def test_quota_is_read_for_the_multi_gpu_type_itself_in_instances(moto_server_url: str, moto_factory: Any) -> None:
    """'ml.g4dn.12xlarge for endpoint usage' decides, counted in instances (not GPUs), read across pages;
    a generous quota of the one-GPU type and an endpoint on it change nothing."""
    filler = {f"ml.m5.{n}xlarge for training job usage": 10.0 for n in range(2, 9)}
    quotas = {**filler, "ml.g4dn.xlarge for endpoint usage": 8.0, "ml.g4dn.12xlarge for endpoint usage": 1.0}
    role = make_role(moto_factory("iam", REGION))
    sm = moto_factory("sagemaker", REGION)
    sm.create_model(ModelName="m", ExecutionRoleArn=role, PrimaryContainer={"Image": "x"})
    for name, instance in (("small", "ml.g4dn.xlarge"), ("big", "ml.g4dn.12xlarge")):
        variant = {"VariantName": "AllTraffic", "ModelName": "m", "InitialInstanceCount": 1, "InstanceType": instance}
        sm.create_endpoint_config(EndpointConfigName=f"c-{name}", ProductionVariants=[variant])
    sm.create_endpoint(EndpointName="small", EndpointConfigName="c-small")
    # moto's CreateEndpointConfig knows ml.g4dn.12xlarge (4 × T4), not the newer ml.g6e types
    request = PreflightRequest.parse(
        {"model": "e2b", "encoding": "qat-w4a16", "instance": ["ml.g4dn.12xlarge"], "region": REGION, "role_arn": role}
    )
    from gemmaserve.sagemaker.aws import Boto3ClientFactory

    with service_quotas_fake(moto_server_url, quotas, page_size=3) as fake:
        factory = Boto3ClientFactory(endpoint_url=fake.url)
        deps = PreflightDeps(factory, check_model=lambda repo: Reachability.REACHABLE)
        free = {f.check: f for f in run_preflight(request, deps, regions=[REGION]).findings}
        sm.create_endpoint(EndpointName="big", EndpointConfigName="c-big")
        held = {f.check: f for f in run_preflight(request, deps, regions=[REGION]).findings}
        factory.close()
    pages = -(-len(quotas) // 3)  # every page read, the last one without a NextToken
    assert len(fake.requests) == 2 * pages and fake.requests[1]["NextToken"] == "3"
    quota = free["quota:us-east-1:ml.g4dn.12xlarge"]
    assert quota.status is Status.OK, quota.detail
    assert quota.detail == "ml.g4dn.12xlarge for endpoint usage: limit 1.0, held by endpoints 0, this deploy needs 1"
    quota = held["quota:us-east-1:ml.g4dn.12xlarge"]
    assert quota.status is Status.FAIL and "held by endpoints 1" in quota.detail
    assert "'ml.g4dn.12xlarge for endpoint usage'" in (quota.fix or "")
    assert not any(check.startswith("quota:") and "ml.g4dn.xlarge" in check for check in held)


def test_preflight_through_the_cli_names_the_type_s_quota(
    moto_server_url: str, moto_factory: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    role = make_role(moto_factory("iam", REGION))
    with service_quotas_fake(moto_server_url, {"ml.g6e.12xlarge for endpoint usage": 0.0}) as fake:
        monkeypatch.setenv("GEMMASERVE_AWS_ENDPOINT_URL", fake.url)
        args = ["sagemaker", "preflight", *BIG, "--instance", "ml.g6e.12xlarge", "--region", REGION]
        code, out, err = run([*args, "--role-arn", role], capsys)
    assert code == 1, err  # not ready: a failed check, not bad usage
    line = next(line for line in out.splitlines() if "quota:us-east-1:ml.g6e.12xlarge" in line)
    assert line.split()[0] == "fail" and "limit 0.0" in line
    assert "fits over 4 GPUs" in out
