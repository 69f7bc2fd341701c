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

from gemmaserve.errors import UnrecognisedSource, UnsupportedVllmVersion
from gemmaserve.turing import filepatch
from gemmaserve.turing.filepatch import PatchTarget
from gemmaserve.turing.plugin import CLAMP_MARK, CudaDevice, install_clamp

T4 = CudaDevice(capability=(7, 5), smem_optin_bytes=65_536)
L4 = CudaDevice(capability=(8, 9), smem_optin_bytes=101_376)


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


STUBBED = ["torch", "vllm", "vllm.envs", "vllm.logger", "vllm.platforms", "vllm.triton_utils", "vllm.v1",
           "vllm.v1.attention", "vllm.v1.attention.ops", "vllm.v1.attention.ops.triton_attention_helpers",
           "vllm.v1.kv_cache_interface", "triton", "triton.language"]


@pytest.fixture
def load_kernel_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in STUBBED:
        monkeypatch.setitem(sys.modules, name, _StubModule(name))

    def load(path: Path) -> types.ModuleType:
        spec = importlib.util.spec_from_file_location("gemmaserve_test_kernel", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


def test_no_op_on_ampere_and_newer_and_without_cuda(kernel_copy: Path, load_kernel_module: Any) -> None:
    module = load_kernel_module(kernel_copy)
    stock = module._get_tile_size

    def must_not_load() -> types.ModuleType:
        raise AssertionError("sm >= 80 must not even import the kernel module")

    assert install_clamp(device=lambda: L4, load_module=must_not_load, vllm_version=lambda: "9.9.9").action \
        == "ampere-or-newer"
    assert install_clamp(device=lambda: None, load_module=must_not_load).action == "no-cuda"
    assert module._get_tile_size is stock


def test_wraps_on_turing_and_logs_one_line(kernel_copy: Path, load_kernel_module: Any,
                                           caplog: pytest.LogCaptureFixture) -> None:
    module = load_kernel_module(kernel_copy)
    stock = module._get_tile_size
    with caplog.at_level(logging.INFO, logger="vllm.gemmaserve.turing"):
        outcome = install_clamp(device=lambda: T4, load_module=lambda: module, vllm_version=lambda: "0.34.0")
    assert outcome.action == "wrapped"
    assert len([r for r in caplog.records if r.name == "vllm.gemmaserve.turing"]) == 1
    wrapped = module._get_tile_size
    assert getattr(wrapped, CLAMP_MARK)
    assert stock(512, 0, 2, True) == 32 and wrapped(512, 0, 2, True) == 16
    for head in (64, 128, 256, 512):
        for window in (0, 512, 1024):
            for prefill in (True, False):
                got = wrapped(head, window, 2, prefill)
                assert got <= stock(head, window, 2, prefill) and 4 * head * (got + 16) <= 65_536
    again = install_clamp(device=lambda: T4, load_module=lambda: module, vllm_version=lambda: "0.34.0")
    assert again.action == "already-wrapped" and module._get_tile_size is wrapped


def test_file_patch_present_is_not_wrapped_again(kernel_copy: Path, load_kernel_module: Any) -> None:
    filepatch.apply(PatchTarget(path=str(kernel_copy)))
    module = load_kernel_module(kernel_copy)
    before = module._get_tile_size
    outcome = install_clamp(device=lambda: T4, load_module=lambda: module, vllm_version=lambda: "0.34.0")
    assert outcome.action == "file-patch-present" and module._get_tile_size is before


def test_unknown_version_refuses_before_loading(kernel_copy: Path, load_kernel_module: Any) -> None:
    with pytest.raises(UnsupportedVllmVersion):
        install_clamp(device=lambda: T4, load_module=lambda: load_kernel_module(kernel_copy),
                      vllm_version=lambda: "0.35.0")


def test_unknown_shape_refuses(kernel_copy: Path, load_kernel_module: Any) -> None:
    kernel_copy.write_text(kernel_copy.read_text().replace("TILE_SIZE_DECODE = _get_tile_size(",
                                                           "TILE_SIZE_DECODE = _other_tile_size("))
    module = load_kernel_module(kernel_copy)
    with pytest.raises(UnrecognisedSource):
        install_clamp(device=lambda: T4, load_module=lambda: module, vllm_version=lambda: "0.34.0")


def test_entry_point_is_declared() -> None:
    points = importlib.metadata.entry_points(group="vllm.general_plugins")
    assert any(p.name == "gemmaserve_turing" and p.value == "gemmaserve.turing.plugin:register" for p in points)


def _platform(answer: Any) -> types.ModuleType:
    module = types.ModuleType("vllm.platforms")

    class Platform:
        def get_device_capability(self) -> Any:
            if isinstance(answer, Exception):
                raise answer
            return answer

    module.current_platform = Platform()  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize(("capability", "limit"), [((7, 5), 65_536), ((7, 0), 98_304), ((6, 1), 49_152)])
def test_device_from_vllm_platform_before_ampere(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int],
                                                 limit: int) -> None:
    from gemmaserve.turing.plugin import current_cuda_device

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.platforms", _platform(capability))
    assert current_cuda_device() == CudaDevice(capability=capability, smem_optin_bytes=limit)


def test_device_on_ampere_and_unknown_pre_ampere(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmaserve.errors import TuringError
    from gemmaserve.turing.plugin import current_cuda_device

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.platforms", _platform((8, 9)))
    found = current_cuda_device()
    assert found is not None and found.capability == (8, 9)
    monkeypatch.setitem(sys.modules, "vllm.platforms", _platform((5, 2)))
    with pytest.raises(TuringError):
        current_cuda_device()


def test_device_falls_back_to_torch_when_the_platform_cannot_tell(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from gemmaserve.turing.plugin import current_cuda_device

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.platforms", _platform(RuntimeError("no NVML")))
    assert not torch.cuda.is_available()  # this machine: the CPU wheel
    assert current_cuda_device() is None
