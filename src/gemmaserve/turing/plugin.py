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
from typing import Any

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


def current_cuda_device() -> CudaDevice | None:
    """The current CUDA device, or None when torch sees none."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device()
    props: Any = torch.cuda.get_device_properties(index)
    limit = getattr(props, "shared_memory_per_block_optin", None)
    if limit is None:
        from triton.runtime import driver

        limit = driver.active.utils.get_device_properties(index)["max_shared_mem"]
    return CudaDevice(capability=(int(props.major), int(props.minor)), smem_optin_bytes=int(limit))


def _without_blocks(source: str) -> str:
    for start, end, _ in reversed(block.find_blocks(source)):
        source = source[:start] + source[end:]
    return source
