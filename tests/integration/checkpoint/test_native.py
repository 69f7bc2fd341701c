"""The kernels' cached object: built once, loaded by later runs without numba, never loaded damaged or stale,
and needing nothing from the process but libc and libm. (Its results: test_kernels.py, on both loaders.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gemmaserve.checkpoint import grid, native
from gemmaserve.checkpoint.native import NativeKernels, NativeKernelsUnavailable
from gemmaserve.checkpoint.native_build import BuiltKernels

pytest.importorskip("numba")

LIBC_AND_LIBM = {"memset", "memcpy", "memmove", "memcmp", "sqrt", "sqrtf", "rint", "rintf", "floor", "floorf"}


@pytest.fixture(scope="module")
def warm_object(kernel_cache_dir: Path) -> Path:
    """The session's object file, built (or found) the way a run does: through ``grid.kernels()``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(grid.KERNEL_ENV, "auto")
        assert isinstance(grid.kernels(), NativeKernels), grid.native_failure
    (path,) = kernel_cache_dir.glob("*.kernels")
    return path


@pytest.fixture
def built(warm_object: Path) -> BuiltKernels:
    """What a build returns, taken from the session's object (a second numba build would cost seconds)."""
    cached = native._decode(warm_object.read_bytes(), native.cache_key())
    assert cached is not None
    return BuiltKernels(cached.object_code, cached.symbols, cached.constants)


class CountingBuild:
    def __init__(self, built: BuiltKernels) -> None:
        self.built, self.calls = built, 0

    def __call__(self) -> BuiltKernels:
        self.calls += 1
        return self.built


def _decodes_exactly(kernels: NativeKernels) -> bool:
    bits = np.arange(0, 1 << 16, 7, dtype=np.uint16)
    out = np.empty(bits.size, np.float32)
    kernels.decode_bf16(bits, out)
    return bool((out.view(np.uint32) == bits.astype(np.uint32) << 16).all())


def test_the_object_needs_nothing_from_numba_or_python(warm_object: Path) -> None:
    """No numba runtime (NRT_*, numba_*), no Python C API (Py*): at most libc and libm, resolved at load."""
    object_code = native._decode(warm_object.read_bytes(), native.cache_key())
    assert object_code is not None
    undefined = native.undefined_symbols(object_code.object_code)
    assert undefined is not None and set(undefined) <= LIBC_AND_LIBM, undefined
    if nm := shutil.which("nm"):  # the same answer from binutils, where it is installed
        copy = warm_object.with_suffix(".o.test")
        copy.write_bytes(object_code.object_code)
        listed = subprocess.run([nm, "-u", str(copy)], capture_output=True, text=True, check=True).stdout.split()
        copy.unlink()
        assert sorted(name for name in listed if name != "U") == undefined


def test_a_fresh_run_with_a_warm_cache_never_imports_numba(
    warm_object: Path, unquantized_dir: Path, tmp_path: Path
) -> None:
    code = (
        "import json, sys\n"
        "from gemmaserve.checkpoint import grid, grid_check, repack_checkpoint\n"
        f"repack_checkpoint({str(unquantized_dir)!r}, {str(tmp_path / 'build')!r})\n"
        f"report = grid_check({str(tmp_path / 'build')!r}, {str(unquantized_dir)!r})\n"
        "print(json.dumps({'numba': 'numba' in sys.modules, 'loaded': type(grid.kernels()).__name__,"
        " 'verdict': report.verdict, 'values': report.values}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != grid.KERNEL_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["loaded"] == "NativeKernels"
    assert result["values"] > 0 and result["verdict"] == "bit-identical"
    assert result["numba"] is False


def test_the_cache_is_read_not_rebuilt(built: BuiltKernels, tmp_path: Path) -> None:
    build = CountingBuild(built)
    first = native.load_kernels(tmp_path, key="k" * 64, build=build)
    second = native.load_kernels(tmp_path, key="k" * 64, build=build)
    assert build.calls == 1 and _decodes_exactly(first) and _decodes_exactly(second)
    assert [p.name for p in tmp_path.iterdir()] == [native.cache_path(tmp_path, "k" * 64).name]  # no temporaries


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: data[:-100] + bytes([data[-100] ^ 0x10]) + data[-99:],  # a flipped bit in the code
        lambda data: data.replace(b'"lanes": 64', b'"lanes": 65'),  # a changed header
        lambda data: b"",
    ],
    ids=["truncated", "flipped-bit", "header", "empty"],
)
def test_a_damaged_cache_file_is_rebuilt_never_loaded(
    built: BuiltKernels, tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    build = CountingBuild(built)
    native.load_kernels(tmp_path, key="d" * 64, build=build)
    path = native.cache_path(tmp_path, "d" * 64)
    good = path.read_bytes()
    path.write_bytes(damage(good))
    assert native._decode(path.read_bytes(), "d" * 64) is None
    kernels = native.load_kernels(tmp_path, key="d" * 64, build=build)
    assert build.calls == 2 and path.read_bytes() == good and _decodes_exactly(kernels)


def test_another_key_builds_anew(built: BuiltKernels, tmp_path: Path) -> None:
    """A changed kernel source (or numba, llvmlite, CPU) is another key: another build, another file."""
    here = Path(native.__file__).parent
    sources = [here / name for name in ("kernels.py", "native.py", "native_build.py")]
    edited = tmp_path / "kernels.py"
    edited.write_text(sources[0].read_text() + "\n# edited\n")
    key, other = native.cache_key(sources), native.cache_key([edited, *sources[1:]])
    assert key == native.cache_key() and other != key
    build = CountingBuild(built)
    native.load_kernels(tmp_path, key=key, build=build)
    native.load_kernels(tmp_path, key=other, build=build)
    assert build.calls == 2
    assert {p.name for p in tmp_path.glob("*.kernels")} == {
        native.cache_path(tmp_path, k).name for k in (key, other)
    }  # fmt: skip
    # A file holding another key's object (renamed into place by hand) is not taken either.
    native.cache_path(tmp_path, other).replace(native.cache_path(tmp_path, key))
    native.load_kernels(tmp_path, key=key, build=build)
    assert build.calls == 3


@pytest.mark.parametrize(
    "change",
    [
        lambda entries, counts: ({**entries, "check_packed_bf16": (*entries["check_packed_bf16"], "i64")}, counts),
        lambda entries, counts: (entries, (*counts, "another_count")),  # the counts array a kernel fills grows
    ],
    ids=["an-argument", "the-counts-array"],
)
def test_a_changed_kernel_signature_is_another_key_and_the_old_object_is_never_loaded(
    built: BuiltKernels, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[..., tuple]
) -> None:
    """The entries' C signatures and the layout of the counts they fill are the contract between the object and
    its callers: a change to either is another key (the sources being the same), and a file written under the
    old contract is rebuilt even if it sits under the new key."""
    build = CountingBuild(built)
    old_key = native.cache_key()
    native.load_kernels(tmp_path, key=old_key, build=build)
    old_file = native.cache_path(tmp_path, old_key).read_bytes()
    entries, counts = change(dict(native.ENTRIES), native.COMPARISON_COUNTS)
    monkeypatch.setattr(native, "ENTRIES", entries)
    monkeypatch.setattr(native, "COMPARISON_COUNTS", counts)
    new_key = native.cache_key()
    assert new_key != old_key
    assert native._decode(old_file, old_key) is None  # the old object, read under the new contract: refused
    native.cache_path(tmp_path, new_key).write_bytes(old_file)  # even renamed into place by hand
    native.load_kernels(tmp_path, key=new_key, build=build)
    assert build.calls == 2


def test_an_object_needing_a_symbol_the_process_lacks_is_refused(built: BuiltKernels, tmp_path: Path) -> None:
    """LLVM's linker would abort the process on an unresolved symbol: the loader checks them first."""
    import llvmlite.binding as llvm

    module = llvm.parse_assembly(
        "declare void @gemmaserve_no_such_symbol()\n"
        "define void @entry() {\n  call void @gemmaserve_no_such_symbol()\n  ret void\n}\n"
    )
    machine = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine()
    foreign = BuiltKernels(machine.emit_object(module), built.symbols, built.constants)
    with pytest.raises(NativeKernelsUnavailable, match="gemmaserve_no_such_symbol"):
        native.load_kernels(tmp_path, key="f" * 64, build=lambda: foreign)


def test_a_failed_build_falls_back_to_numba_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> NativeKernels:
        raise NativeKernelsUnavailable("building the kernels' object code failed: no compiler today")

    monkeypatch.setattr(native, "load_kernels", fail)
    monkeypatch.setenv(grid.KERNEL_ENV, "auto")
    grid._load_native.cache_clear()
    try:
        fallback = grid.kernels()
        assert fallback is not None and not isinstance(fallback, NativeKernels)
        assert grid.kernel_name() == "numba" and "no compiler today" in grid.native_failure[-1]
    finally:
        grid._load_native.cache_clear()


def test_a_wrong_array_is_refused_not_read(warm_object: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(grid.KERNEL_ENV, "auto")
        kernels = grid.kernels()
    assert isinstance(kernels, NativeKernels)
    bits = np.zeros(64, np.uint16)
    with pytest.raises(ValueError, match="64 C-contiguous float32"):
        kernels.decode_bf16(bits, np.zeros(64, np.float64))
    with pytest.raises(ValueError, match="strided"):
        kernels.decode_bf16(np.zeros(128, np.uint16)[::2], np.zeros(64, np.float32))
    with pytest.raises(ValueError, match="not groups of 32"):
        kernels.repack_bf16(np.zeros(40, np.uint16), *[np.zeros(1)] * 6)


def test_the_cache_lives_under_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert native.default_cache_dir() == tmp_path / "gemmaserve" / "kernels"
    for ignored in ("", "relative/dir"):  # the XDG spec: unset, empty or relative means ~/.cache
        monkeypatch.setenv("XDG_CACHE_HOME", ignored)
        assert native.default_cache_dir() == Path.home() / ".cache" / "gemmaserve" / "kernels"
