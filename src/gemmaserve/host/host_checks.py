"""Verdicts on host capacity and the GPU: the cheapest checks, so they come first (pure).

Host RAM is a hard term: a 2-vCPU, 7.8 GB host with no swap is OOM-killed while
vLLM loads E2B; a swapfile fixed it (peak swap 6,761 MiB bf16, 4,770 MiB QAT).
"""

from __future__ import annotations

import math

from gemmaserve.findings import Check, Finding
from gemmaserve.host.disk import GIB, DiskFacts, DiskRole
from gemmaserve.host.gpu import GpuInfo
from gemmaserve.host.memory import MemoryFacts
from gemmaserve.host.probed import Probed
from gemmaserve.host.verdicts import HostNeeds

# Temp space vLLM and torch use at start-up (compile artefacts, shared-memory files).
TEMP_MIN_GIB = 2.0
SWAP_MARGIN_GIB = 1.0
SWAP_ROUND_GIB = 4
DRIVER_INSTALL = "sudo apt install nvidia-driver-580-server && sudo reboot"


def swapfile_size_gib(shortfall_gib: float) -> int:
    """A swapfile that covers ``shortfall_gib`` with a margin, rounded up to a multiple of 4 GiB."""
    return max(
        SWAP_ROUND_GIB,
        math.ceil((shortfall_gib + SWAP_MARGIN_GIB) / SWAP_ROUND_GIB) * SWAP_ROUND_GIB,
    )


def swapfile_command_lines(size_gib: int, path: str = "/swapfile") -> list[str]:
    """Make and enable the swapfile; keep it after a reboot: two commands, each pasted whole."""
    return [
        f"sudo fallocate -l {size_gib}G {path} && sudo chmod 600 {path} && sudo mkswap {path} && sudo swapon {path}",
        f"echo '{path} none swap sw 0 0' | sudo tee -a /etc/fstab",
    ]


def swapfile_commands(size_gib: int, path: str = "/swapfile") -> str:
    make, keep = swapfile_command_lines(size_gib, path)
    return f"{make}   (to keep it after reboot: {keep})"


def check_host_memory(memory: Probed[MemoryFacts], needs: Probed[HostNeeds]) -> Finding:
    check = Check("host.memory", "Host RAM + swap can stage the checkpoint")
    if memory.value is None:
        return check.unknown(f"/proc/meminfo: {memory.error}")
    facts = memory.value
    have = (
        f"MemAvailable {facts.mem_available_gib:.1f} GiB (of {facts.mem_total_bytes / GIB:.1f} GiB) "
        f"+ free swap {facts.swap_free_gib:.1f} GiB (of {facts.swap_total_bytes / GIB:.1f} GiB)"
    )
    if needs.value is None:
        return check.unknown(f"{have}; what loading needs is unknown: {needs.error}")
    plan = needs.value
    needed = plan.host_ram_needed_gib
    what = f"loading {plan.model} {plan.encoding} needs {needed:.1f} GiB"
    if facts.stageable_gib >= needed:
        if facts.mem_available_gib >= needed:
            return check.ok(f"{have}; {what}")
        return check.warn(f"{have}; {what}: the load will page through swap and be slower")
    size = swapfile_size_gib(needed - facts.stageable_gib)
    return check.fail(
        f"{have} = {facts.stageable_gib:.1f} GiB; {what}: the kernel's OOM killer will stop vLLM mid-load",
        fix=f"Add a {size} GiB swapfile: {swapfile_commands(size)}",
        commands=swapfile_command_lines(size),
    )


def _role_need_gib(role: DiskRole, needs: HostNeeds) -> float:
    return {
        DiskRole.INSTALL: needs.install_disk_gib,
        DiskRole.TEMP: needs.temp_disk_gib,
        DiskRole.HF_CACHE: 0.0 if needs.checkpoint_cached else needs.checkpoint_gib,
    }[role]


def check_disk(disk: DiskFacts, needs: Probed[HostNeeds]) -> Finding:
    check = Check("host.disk", "Disk for the install, temp and weights-cache paths")
    lines = []
    for space in disk.paths:
        if space.error:
            lines.append(f"{space.role.value} {space.path}: {space.error}")
        else:
            shown = space.path if space.path == space.resolved_path else f"{space.path} -> {space.resolved_path}"
            lines.append(
                f"{space.role.value} {shown}: {(space.free_bytes or 0) / GIB:.1f} GiB free on device {space.device}"
            )
    if any(space.error for space in disk.paths):
        return check.unknown("; ".join(lines))
    if needs.value is None:
        lines.append(f"what the deployment needs is unknown: {needs.error}")
        return check.unknown("; ".join(lines))
    plan = needs.value
    short: list[str] = []
    for fs in disk.filesystems:
        need = sum(_role_need_gib(role, plan) for role in fs.roles)
        roles = " + ".join(role.value for role in fs.roles)
        free = fs.free_bytes / GIB
        lines.append(f"filesystem at {fs.measured_path} holds {roles}: needs {need:.1f} GiB, {free:.1f} GiB free")
        if free < need:
            short.append(f"free {need - free:.1f} GiB on the filesystem at {fs.measured_path} ({roles})")
    if plan.checkpoint_cached:
        lines.append(f"{plan.repo_id} is already in the weights cache")
    if short:
        return check.fail(
            "; ".join(lines),
            fix="; ".join(short)
            + " — or point a path at a larger disk (TMPDIR=/big/tmp, HF_HOME=/big/hf) before installing and serving",
        )
    return check.ok("; ".join(lines))


def describe_gpu(gpu: GpuInfo) -> str:
    sm = f"sm_{gpu.sm}" if gpu.sm is not None else "compute capability unknown"
    memory = f"{gpu.memory_total_mib} MiB" if gpu.memory_total_mib is not None else "memory unknown"
    return f"GPU {gpu.index}: {gpu.name}, {sm}, {memory}, driver {gpu.driver_version or 'unknown'}"


def check_gpu(gpus: Probed[list[GpuInfo]]) -> Finding:
    check = Check("gpu.driver", "An NVIDIA GPU and driver (nvidia-smi)")
    if not gpus.value:
        return check.fail(
            gpus.error or "no GPU listed",
            fix="Run on a GPU instance (g4dn/g6/g6e) with the NVIDIA driver installed, "
            f"e.g. an AWS Deep Learning AMI, or: {DRIVER_INSTALL}",
            commands=[DRIVER_INSTALL],
        )
    first = gpus.value[0]
    if first.sm is None:
        return check.unknown(
            f"{describe_gpu(first)}: this driver does not report compute_cap",
            fix="Upgrade the NVIDIA driver to 580 or newer (CUDA 13 builds of torch need it anyway)",
        )
    others = f" (+{len(gpus.value) - 1} more)" if len(gpus.value) > 1 else ""
    return check.ok(describe_gpu(first) + others)


def check_plan_fits(needs: Probed[HostNeeds], gpus: Probed[list[GpuInfo]]) -> Finding:
    check = Check("gpu.plan", "The model fits this GPU (plan)")
    if needs.value is None:
        return check.unknown(f"no plan: {needs.error}")
    plan = needs.value
    if not gpus.value and plan.gpu is None:
        return check.unknown("not checked: no GPU to plan for")
    if plan.fits is None or plan.gpu is None:
        shown = describe_gpu(gpus.value[0]) if gpus.value else "no GPU"
        return check.unknown(
            f"{shown} is not a GPU in the catalog, so no plan was made for it",
            fix="Name the closest catalog GPU with --gpu (see `gemmaserve plan`)",
        )
    rules = f" ({plan.vllm_rules})" if plan.vllm_rules else ""
    evidence = f"{plan.model} {plan.encoding} on {plan.gpu}: {plan.verdict}"
    if plan.fits:
        return check.ok(evidence + rules)
    command = "gemmaserve plan --model " + plan.model
    return check.fail(
        f"{evidence}: {plan.binding_term}{rules}",
        fix="Pick a smaller encoding or a larger GPU: " + command,
        commands=[command],
    )
