"""Load vLLM's real unified-attention kernel file as a module, without vLLM installed.

The kernel file imports a handful of vLLM names; this module supplies minimal stand-ins for them
(and loads the real `triton_attention_helpers.py` found beside the kernel file), so the real
`@triton.jit` code can be compiled for an explicit target or launched on a GPU. Needs triton (the
`kernel` extra). Torch is used when it is installed (launching needs it); without it a stand-in answers
the kernel file's one module-level use of torch (the fp8 range), which is all compiling needs. Used by
`smem`, the tests and the GPU benchmark, never by the plugin.
"""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import logging
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

KERNEL_FILE_NAME = "triton_unified_attention.py"
HELPERS_FILE_NAME = "triton_attention_helpers.py"
HELPERS_MODULE = "vllm.v1.attention.ops.triton_attention_helpers"


class KVQuantModeStandIn(enum.IntEnum):
    """The values vLLM's `KVQuantMode` has in 0.29–0.34 (the kernel passes it as a constexpr)."""

    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3
    INT4_PER_TOKEN_HEAD = 4


class TorchStandInTooSmall(AttributeError):
    """The kernel file asked the torch stand-in for something it does not offer (torch is not installed)."""


# torch.finfo(torch.float8_e4m3fn): the FP8 output range the kernel clamps to (OCP E4M3: ±448).
_FLOAT8_E4M3_RANGE = (-448.0, 448.0)


class _FinfoStandIn:
    def __init__(self, dtype: object) -> None:
        if dtype != "float8_e4m3fn":
            raise TorchStandInTooSmall(f"torch.finfo({dtype!r}) (only float8_e4m3fn is known)")
        self.min, self.max = _FLOAT8_E4M3_RANGE


class _TensorStandIn:
    """Nothing is an instance of it: compiling never calls the Python side that checks."""


def _torch_stand_in() -> types.ModuleType:
    module = types.ModuleType("torch")
    module.float8_e4m3fn = "float8_e4m3fn"  # type: ignore[attr-defined]
    module.finfo = _FinfoStandIn  # type: ignore[attr-defined]
    module.Tensor = _TensorStandIn  # type: ignore[attr-defined]

    def missing(name: str) -> Any:
        raise TorchStandInTooSmall(f"torch.{name} (torch is not installed; a stand-in answers for it)")

    module.__getattr__ = missing  # type: ignore[method-assign]
    return module


def _torch_is_installed() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


class _PlatformStandIn:
    """Answers the few questions the kernel file asks vLLM's `current_platform`."""

    def __init__(self, capability: tuple[int, int]) -> None:
        self.capability = capability

    def fp8_dtype(self) -> Any:
        import torch  # the real one, or the stand-in installed while the file loads

        return torch.float8_e4m3fn

    def is_device_capability_family(self, family: int) -> bool:
        return self.capability[0] * 10 == family

    def is_rocm(self) -> bool:
        return False

    def is_cuda(self) -> bool:
        return True


def _stand_in_modules(capability: tuple[int, int]) -> dict[str, types.ModuleType]:
    import triton
    import triton.language as tl

    modules = {
        name: types.ModuleType(name)
        for name in (
            "vllm",
            "vllm.envs",
            "vllm.logger",
            "vllm.platforms",
            "vllm.triton_utils",
            "vllm.v1",
            "vllm.v1.attention",
            "vllm.v1.attention.ops",
            "vllm.v1.kv_cache_interface",
        )
    }
    modules["vllm.envs"].VLLM_BATCH_INVARIANT = False  # type: ignore[attr-defined]
    modules["vllm.logger"].init_logger = logging.getLogger  # type: ignore[attr-defined]
    modules["vllm.platforms"].current_platform = _PlatformStandIn(capability)  # type: ignore[attr-defined]
    modules["vllm.triton_utils"].tl = tl  # type: ignore[attr-defined]
    modules["vllm.triton_utils"].triton = triton  # type: ignore[attr-defined]
    modules["vllm.v1.kv_cache_interface"].KVQuantMode = KVQuantModeStandIn  # type: ignore[attr-defined]
    modules["vllm"].envs = modules["vllm.envs"]  # type: ignore[attr-defined]
    if not _torch_is_installed():
        modules["torch"] = _torch_stand_in()
    return modules


@contextlib.contextmanager
def _installed(modules: dict[str, types.ModuleType]) -> Iterator[None]:
    absent = object()
    # A None entry (an import blocked on purpose) is kept as it was, not mistaken for no entry.
    saved = {name: sys.modules.get(name, absent) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, previous in saved.items():
            if previous is absent:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous  # type: ignore[assignment]


def _exec_file(module_name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def load_kernel_module(
    kernel_file: Path, *, capability: tuple[int, int] = (7, 5), module_name: str | None = None
) -> types.ModuleType:
    """Import the real kernel file (and its helpers beside it) under a private module name.

    `capability` is what the stand-in `current_platform` reports. The loaded module stays in
    `sys.modules` under its private name (triton reads the source through it).
    """
    helpers_file = kernel_file.with_name(HELPERS_FILE_NAME)
    if not helpers_file.is_file():
        raise FileNotFoundError(f"{helpers_file} (the kernel's helpers) is missing beside {kernel_file}")
    modules = _stand_in_modules(capability)
    private = module_name or f"gemmaserve_vllm_kernel_{abs(hash((str(kernel_file), capability)))}"
    with _installed(modules):
        helpers = _exec_file(private + "_helpers", helpers_file)
        modules[HELPERS_MODULE] = helpers
        sys.modules[HELPERS_MODULE] = helpers
        return _exec_file(private, kernel_file)
