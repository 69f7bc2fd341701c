"""Doctor's checks for a model split over several GPUs of this host (``--tensor-parallel-size N``, N > 1).

Pure: judges what was already probed. Four questions, each required: are N GPUs visible (nvidia-smi's
list narrowed by ``CUDA_VISIBLE_DEVICES``, and torch in the target interpreter agreeing), does each hold
the plan's per-rank figure, can they reach each other directly (peer access), and does the target's torch
carry NCCL. What could not be checked is ``unknown``: never a pass. Peer access that is known to be
missing only warns: vLLM then turns its custom all-reduce off and NCCL goes through host memory (slower,
and what the plan's ``fully_connected`` rule for the custom all-reduce buffer assumes away).
When vLLM runs on the CPU platform the ranks are CPU processes talking gloo: the four are not applicable.
"""

from __future__ import annotations

from dataclasses import dataclass

from gemmaserve.findings import Check, Finding, Status
from gemmaserve.host.gpu import GpuInfo
from gemmaserve.host.interpreter import InterpreterFacts
from gemmaserve.host.probed import Probed
from gemmaserve.host.verdicts import HostPlan

VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
# A GPU counts as the plan's when its memory is within this fraction of the catalog GPU's (as doctor's match).
MEMORY_MATCH_FRACTION = 0.06
SMALLER_N = "or plan a smaller --tensor-parallel-size: gemmaserve plan --tensor-parallel-size"


@dataclass(frozen=True)
class SplitInputs:
    """What the split checks judge: the size asked for and what doctor probed."""

    size: int
    gpus: Probed[list[GpuInfo]]
    visible: str | None  # CUDA_VISIBLE_DEVICES as doctor's environment has it (None: unset)
    interpreter: Probed[InterpreterFacts]
    plan: HostPlan


def visible_gpus(gpus: list[GpuInfo], visible: str | None) -> Probed[list[GpuInfo]]:
    """The GPUs CUDA would number 0, 1, … under ``CUDA_VISIBLE_DEVICES`` (pure).

    Unset: all of them. Indices pick from nvidia-smi's list in that order; an index CUDA would stop at
    (not a number, not listed) ends the list, as CUDA does. UUIDs and MIG names cannot be matched to
    nvidia-smi's index list here: that is an error, not "all".
    """
    if visible is None:
        return Probed[list[GpuInfo]](value=list(gpus))
    chosen: list[GpuInfo] = []
    by_index = {gpu.index: gpu for gpu in gpus}
    for entry in (part.strip() for part in visible.split(",")):
        if entry.startswith(("GPU-", "MIG-")):
            return Probed[list[GpuInfo]](
                error=f"{VISIBLE_ENV}={visible} names devices by UUID, which doctor cannot match to nvidia-smi's"
            )
        if not entry.isdigit() or int(entry) not in by_index:
            break
        chosen.append(by_index[int(entry)])
    return Probed[list[GpuInfo]](value=chosen)


def _on_cpu(facts: InterpreterFacts | None) -> bool:
    return facts is not None and facts.vllm.imported and facts.vllm.platform == "cpu"


def check_gpu_count(inputs: SplitInputs) -> Finding:
    title = f"{inputs.size} GPUs visible for --tensor-parallel-size {inputs.size}"
    check = Check("gpu.count", title)
    if inputs.gpus.value is None:
        return check.unknown(f"could not check: {inputs.gpus.error}")
    visible = visible_gpus(inputs.gpus.value, inputs.visible)
    if visible.value is None:
        return check.unknown(f"could not check: {visible.error}", fix=f"Set {VISIBLE_ENV} by index")
    shown = f" ({VISIBLE_ENV}={inputs.visible})" if inputs.visible is not None else ""
    listed = ", ".join(f"{gpu.index}: {gpu.name}" for gpu in visible.value) or "none"
    if len(visible.value) < inputs.size:
        return check.fail(
            f"{len(visible.value)} of the {len(inputs.gpus.value)} GPUs nvidia-smi lists are visible{shown}: {listed}",
            fix=f"Use a host with {inputs.size} GPUs, widen {VISIBLE_ENV}, {SMALLER_N}",
        )
    facts = inputs.interpreter.value
    torch_count = facts.torch.device_count if facts is not None and facts.torch.cuda_available else None
    if torch_count is not None and torch_count < inputs.size:
        return check.fail(
            f"nvidia-smi shows {listed}{shown} but torch in the target interpreter sees {torch_count}",
            fix=f"Check {VISIBLE_ENV} in the environment vLLM will run in",
        )
    names = {gpu.name for gpu in visible.value[: inputs.size]}
    if len(names) > 1:
        return check.fail(
            f"the first {inputs.size} visible GPUs differ ({', '.join(sorted(names))}): vLLM splits the "
            "model evenly, so the smallest decides",
            fix=f"Make {VISIBLE_ENV} list {inputs.size} GPUs of one kind",
        )
    return check.ok(f"GPUs {listed}{shown}")


def check_memory_per_rank(inputs: SplitInputs) -> Finding:
    from gemmaserve.catalog import load_catalog

    check = Check("gpu.memory_per_rank", "Each GPU holds the plan's per-rank figure")
    row = inputs.plan.row
    if row is None or not inputs.plan.gpu_known or row.memory is None:
        why = inputs.plan.error or "no plan for a catalog GPU (name one with --gpu)"
        return check.unknown(f"could not check: {why}")
    if inputs.gpus.value is None:
        return check.unknown(f"could not check: {inputs.gpus.error}")
    visible = (visible_gpus(inputs.gpus.value, inputs.visible).value or [])[: inputs.size]
    if len(visible) < inputs.size:
        return check.unknown("could not check: fewer GPUs visible than ranks")
    planned_mib = load_catalog().gpus[row.gpu].memory_mib
    memory = row.memory
    per_rank = (
        f"per rank ({row.model} {row.encoding}, vLLM {row.vllm_version} rules): weights {memory.weights_gib:.2f} GiB, "
        f"KV budget {memory.kv_budget_gib:.2f} GiB of {memory.requested_gib:.2f} GiB requested on a {row.gpu} "
        f"({planned_mib} MiB)"
    )
    unknown = [gpu.index for gpu in visible if gpu.memory_total_mib is None]
    if unknown:
        return check.unknown(
            f"could not check: nvidia-smi gave no memory for GPU {', '.join(map(str, unknown))}; {per_rank}",
        )
    short = [gpu for gpu in visible if (gpu.memory_total_mib or 0) < planned_mib * (1 - MEMORY_MATCH_FRACTION)]
    if short:
        listed = ", ".join(f"GPU {gpu.index} has {gpu.memory_total_mib} MiB" for gpu in short)
        return check.fail(
            f"{listed}; {per_rank}",
            fix="Plan for the smaller GPU with --gpu, " + SMALLER_N.removeprefix("or "),
        )
    if not row.fits:
        return check.fail(
            f"{row.verdict}: {row.binding_term}; {per_rank}",
            fix="Split over more GPUs or pick a smaller encoding: gemmaserve plan --model " + row.model,
        )
    return check.ok(per_rank)


def check_peer_access(inputs: SplitInputs) -> Finding:
    check = Check("gpu.peer_access", "The GPUs reach each other directly (peer access)")
    facts = inputs.interpreter.value
    torch = facts.torch if facts is not None else None
    if torch is None or not torch.cuda_available:
        return check.unknown("could not check: torch in the target sees no GPU")
    matrix = torch.peer_access
    if matrix is None or len(matrix) < inputs.size:
        why = torch.peer_access_error or f"the probe saw {torch.device_count} device(s)"
        return check.unknown(f"could not check: {why}")
    missing = [
        f"{i}->{j}"
        for i in range(inputs.size)
        for j in range(inputs.size)
        if i != j and not (j < len(matrix[i]) and matrix[i][j])
    ]
    if missing:
        return check.warn(
            f"no peer access {', '.join(missing)}: vLLM turns its custom all-reduce off and NCCL goes "
            "through host memory (slower)",
        )
    return check.ok(f"every pair of devices 0-{inputs.size - 1}")


def check_nccl(inputs: SplitInputs) -> Finding:
    check = Check("torch.nccl", "torch in the target interpreter carries NCCL")
    facts = inputs.interpreter.value
    if facts is None or not facts.torch.imported:
        return check.unknown("could not check: torch did not import in the target")
    torch = facts.torch
    if torch.nccl_available is False:
        return check.fail(
            f"torch {torch.version}: torch.distributed.is_nccl_available() is False"
            + (f" ({torch.nccl_version_error})" if torch.nccl_version_error else ""),
            fix="Install the CUDA build of torch that vLLM pins (it ships NCCL)",
        )
    if torch.nccl_available is None or torch.nccl_version is None:
        why = torch.nccl_available_error or torch.nccl_version_error or "the probe did not say"
        return check.unknown(f"could not check: {why}")
    return check.ok(f"NCCL {torch.nccl_version} (torch {torch.version})")


def tensor_parallel_checks(inputs: SplitInputs) -> list[Finding]:
    """The split's verdicts, in order; none for one GPU (pure)."""
    if inputs.size <= 1:
        return []
    checks = [check(inputs) for check in (check_gpu_count, check_memory_per_rank, check_peer_access, check_nccl)]
    facts = inputs.interpreter.value
    if _on_cpu(facts):
        assert facts is not None
        why = (
            f"not applicable: {facts.vllm.distribution or 'vllm'} {facts.vllm.engine_version} runs its "
            f"{inputs.size} ranks as CPU processes (gloo)"
        )
        return [
            check.model_copy(update={"status": Status.NOT_APPLICABLE, "detail": why, "fix": None}) for check in checks
        ]
    return checks
