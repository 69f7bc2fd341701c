"""Delivery 1: the ``vllm.general_plugins`` entry point; nothing in site-packages is edited.

vLLM calls ``register()`` in every process it starts, before the model is built. On sm >= 80 it
does nothing at all. Before Ampere it wraps the unified-attention module's ``_get_tile_size``
(looked up by name at call time by ``unified_attention``) with the rule, logs one line, and
raises, so the engine does not start, when the vLLM version or its source shape is unknown.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from gemmaserve.errors import TuringError
from gemmaserve.turing import block
from gemmaserve.turing.rule import (
    DEFAULT_BLOCK_M,
    SMEM_MARGIN_BYTES,
    clamp_tile_size,
    next_power_of_2,
)
from gemmaserve.turing.shape import TILE_FUNCTION, recognise
from gemmaserve.turing.versions import require_supported

KERNEL_MODULE = "vllm.v1.attention.ops.triton_unified_attention"
CLAMP_MARK = "__gemmaserve_turing_clamp__"
# A child of vLLM's own logger, so the line appears in the engine log with vLLM's formatting.
logger = logging.getLogger("vllm.gemmaserve.turing")


@dataclass(frozen=True, slots=True)
class CudaDevice:
    capability: tuple[int, int]
    smem_optin_bytes: int


@dataclass(frozen=True, slots=True)
class PluginOutcome:
    action: str  # "no-cuda" | "ampere-or-newer" | "wrapped" | "already-wrapped" | "file-patch-present"
    detail: str


def register() -> None:
    """The entry point vLLM calls (``gemmaserve.turing.plugin:register``)."""
    install_clamp()


def install_clamp(*, device: Callable[[], CudaDevice | None] | None = None,
                  load_module: Callable[[], ModuleType] | None = None,
                  vllm_version: Callable[[], str] | None = None) -> PluginOutcome:
    """Wrap the tile function on pre-Ampere GPUs. Raises UnsupportedVllmVersion / UnrecognisedSource."""
    found = (device or current_cuda_device)()
    if found is None:
        return PluginOutcome("no-cuda", "no CUDA device visible: nothing to clamp")
    if found.capability[0] >= 8:
        return PluginOutcome("ampere-or-newer", f"sm_{found.capability[0]}{found.capability[1]}: untouched")
    version = (vllm_version or (lambda: importlib.metadata.version("vllm")))()
    require_supported(version)
    module = (load_module or (lambda: importlib.import_module(KERNEL_MODULE)))()
    source_path = Path(str(module.__file__))
    source = source_path.read_text()
    if block.find_blocks(source):
        recognise(_without_blocks(source), where=str(source_path))
        outcome = PluginOutcome("file-patch-present", f"{source_path} already carries the clamp block")
        logger.info("gemmaserve: Turing clamp already in %s (file patch); plugin left it as is", source_path)
        return outcome
    recognise(source, where=str(source_path))
    stock = getattr(module, TILE_FUNCTION)
    if getattr(stock, CLAMP_MARK, False):
        return PluginOutcome("already-wrapped", "the tile function is already wrapped in this process")
    setattr(module, TILE_FUNCTION, clamped_tile_function(stock, found))
    logger.info("gemmaserve: Turing clamp active on sm_%d%d (%s B shared memory per block): vLLM %s "
                "unified-attention tiles capped to fit (head 512 prefill tile 32 -> %d)",
                found.capability[0], found.capability[1], f"{found.smem_optin_bytes:,}", version,
                clamp_tile_size(found.capability[0], found.smem_optin_bytes, 512, 2, 32, DEFAULT_BLOCK_M))
    return PluginOutcome("wrapped", f"vLLM {version}: {TILE_FUNCTION} wrapped for sm_"
                                    f"{found.capability[0]}{found.capability[1]}")


def clamped_tile_function(stock: Callable[..., int], device: CudaDevice) -> Callable[..., int]:
    @functools.wraps(stock)
    def _get_tile_size(head_size: int, sliding_window: int, element_size: int, is_prefill: bool) -> int:
        tile = stock(head_size, sliding_window, element_size, is_prefill)
        return clamp_tile_size(device.capability[0], device.smem_optin_bytes, next_power_of_2(head_size),
                               element_size, tile, DEFAULT_BLOCK_M, SMEM_MARGIN_BYTES)

    setattr(_get_tile_size, CLAMP_MARK, True)
    return _get_tile_size


#: Opt-in shared memory per block before Ampere (CUDA C++ Programming Guide, "Compute Capabilities").
PRE_AMPERE_SMEM_OPTIN_BYTES = {(6, 0): 49_152, (6, 1): 49_152, (6, 2): 49_152,
                               (7, 0): 98_304, (7, 2): 98_304, (7, 5): 65_536}


def current_cuda_device() -> CudaDevice | None:
    """GPU 0's capability from vLLM's platform (NVML: no CUDA context in the process that forks workers).

    Falls back to torch when vLLM's platform cannot tell. Raises TuringError for a pre-Ampere
    capability whose shared-memory limit gemmaserve does not know (never guess).
    """
    capability = _capability_from_vllm() or _capability_from_torch()
    if capability is None:
        return None
    if capability[0] >= 8:
        return CudaDevice(capability=capability, smem_optin_bytes=0)  # not consulted on sm >= 80
    limit = PRE_AMPERE_SMEM_OPTIN_BYTES.get(capability)
    if limit is None:
        raise TuringError(f"sm_{capability[0]}{capability[1]} is pre-Ampere and its shared-memory limit is not "
                          "known to gemmaserve's Turing clamp; refusing to start vLLM unclamped.",
                          capability=f"{capability[0]}.{capability[1]}")
    return CudaDevice(capability=capability, smem_optin_bytes=limit)


def _capability_from_vllm() -> tuple[int, int] | None:
    try:
        from vllm.platforms import current_platform  # type: ignore[import-not-found]

        found = current_platform.get_device_capability()
    except Exception:  # noqa: BLE001 — an old or CPU-only platform: ask torch instead
        return None
    return None if found is None else (int(found[0]), int(found[1]))


def _capability_from_torch() -> tuple[int, int] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return int(major), int(minor)


def _without_blocks(source: str) -> str:
    for start, end, _ in reversed(block.find_blocks(source)):
        source = source[:start] + source[end:]
    return source
