"""The one-pass checkpoint kernels as machine code loaded through llvmlite alone: no ``import numba`` per run.

Importing numba and its first dispatch (even from numba's disk cache) cost ~0.5 s a run, most of a 1 GB
grid-check. So the kernels the bf16 one-pass paths call are built once by numba (``native_build.py``) into an
object file with C entry points, kept under the user cache dir (``$XDG_CACHE_HOME`` or ``~/.cache``, then
``gemmaserve/kernels/``), keyed on the kernels' source, the numba and llvmlite versions and the host CPU, with a
checksum; later runs link it with llvmlite's JIT and call it through ctypes (the GIL released). Every failure
raises here; ``grid.kernels()`` then uses numba's dispatchers (never a wrong answer, never a failed command).
The other kernels stay numba's, imported on first use. ELF objects only (Linux). No printing.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gemmaserve.checkpoint.native_abi import COMPARISON_COUNTS, ENTRIES, undefined_symbols
from gemmaserve.fileio import write_atomic

if TYPE_CHECKING:
    from gemmaserve.checkpoint.native_build import BuiltKernels

_FORMAT = b"gemmaserve checkpoint kernels 2\n"
_SOURCES = ("kernels.py", "native.py", "native_build.py")


def _contract() -> dict[str, object]:
    """What callers and object code must agree on beyond the sources' text: each entry's C arguments and the
    counts array's layout. In the key and in the file's header, so an object built for another is never called."""
    return {
        "entries": {name: list(arguments) for name, arguments in ENTRIES.items()},
        "counts": list(COMPARISON_COUNTS),
    }


def default_cache_dir() -> Path:
    home = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(home):  # the XDG spec: a relative value is to be ignored
        home = str(Path.home() / ".cache")
    return Path(home) / "gemmaserve" / "kernels"


def cache_key(sources: Iterable[Path] | None = None) -> str:
    """What the object code depends on: the sources that build it, numba and llvmlite (versions), the host CPU, and
    the contract with its callers (``_contract``: the entries' signatures, the counts' layout).

    Raises:
        metadata.PackageNotFoundError: numba is not installed (nothing could build the object).
    """
    import llvmlite  # type: ignore[import-untyped, unused-ignore]
    import llvmlite.binding as llvm  # type: ignore[import-untyped, unused-ignore]

    here = Path(__file__).parent
    digest = hashlib.sha256(_FORMAT)
    for path in sources if sources is not None else (here / name for name in _SOURCES):
        source = path.read_bytes()
        digest.update(len(source).to_bytes(8, "little") + source)
    parts = (
        _numba_version(), llvmlite.__version__, llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(),
        platform.machine(), sys.platform,
    )  # fmt: skip
    digest.update(json.dumps([parts, _contract()]).encode())
    return digest.hexdigest()


def _numba_version() -> str:
    """numba's version file as installed (read, not imported: ``importlib.metadata`` takes ~15 ms to find it)."""
    spec = find_spec("numba")
    if spec is None or not spec.submodule_search_locations:
        raise metadata.PackageNotFoundError("numba")
    version_file = Path(next(iter(spec.submodule_search_locations))) / "_version.py"
    try:
        return hashlib.sha256(version_file.read_bytes()).hexdigest()
    except OSError:
        return metadata.version("numba")


class NativeKernelsUnavailable(RuntimeError):
    """The object code could not be built, read or linked (the caller falls back to numba's dispatchers)."""


@dataclass(frozen=True, slots=True)
class _Cached:
    object_code: bytes
    symbols: dict[str, str]
    constants: dict[str, int]


def _encode(key: str, built: _Cached) -> bytes:
    header = json.dumps(
        {"key": key, "contract": _contract(), "symbols": built.symbols, "constants": built.constants}
    ).encode()
    payload = len(header).to_bytes(8, "little") + header + built.object_code
    return _FORMAT + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def _decode(data: bytes, key: str) -> _Cached | None:
    """The cached object, or None if the file is not one, is damaged (checksum), or was built for another key or
    another contract with its callers."""
    head = len(_FORMAT)
    if data[:head] != _FORMAT or len(data) < head + 65 + 8:
        return None
    checksum, payload = data[head : head + 64], data[head + 65 :]
    if hashlib.sha256(payload).hexdigest().encode() != checksum:
        return None
    size = int.from_bytes(payload[:8], "little")
    try:
        header = json.loads(payload[8 : 8 + size])
        symbols = {str(name): str(header["symbols"][name]) for name in ENTRIES}
        constants = {name: int(header["constants"][name]) for name in ("lanes", "chunk_groups")}
    except (ValueError, TypeError, KeyError):
        return None
    if header.get("key") != key or header.get("contract") != _contract():
        return None
    return _Cached(payload[8 + size :], symbols, constants)


def cache_path(cache_dir: Path, key: str) -> Path:
    return cache_dir / f"{key[:32]}.kernels"


def _build() -> BuiltKernels:
    from gemmaserve.checkpoint.native_build import build_kernels

    return build_kernels()


_link_lock = threading.Lock()


def load_kernels(
    cache_dir: Path | None = None, *, key: str | None = None, build: Callable[[], BuiltKernels] | None = None
) -> NativeKernels:
    """The kernels from the cache, built (numba) and cached first if the cache has none for this key or a damaged one.

    ``key`` defaults to ``cache_key()``; ``build`` to numba's build (tests pass their own).

    Raises:
        NativeKernelsUnavailable: the object could not be built or linked.
    """
    try:
        key = key or cache_key()
    except (OSError, metadata.PackageNotFoundError) as exc:
        raise NativeKernelsUnavailable(f"no cache key: {exc}") from exc
    path = cache_path(cache_dir or default_cache_dir(), key)
    try:
        cached = _decode(path.read_bytes(), key)
    except OSError:
        cached = None
    if cached is None:
        try:
            built = (build or _build)()
        except Exception as exc:  # numba missing, a compile error: the dispatchers may still work
            raise NativeKernelsUnavailable(f"building the kernels' object code failed: {exc}") from exc
        cached = _Cached(built.object_code, built.symbols, built.constants)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, _encode(key, cached))  # another run sees the old file or the new one whole
        except OSError:
            pass  # a read-only cache dir: use the object now, build again next run
    with _link_lock:
        return _link(cached)


def _link(cached: _Cached) -> NativeKernels:
    import llvmlite.binding as llvm

    undefined = undefined_symbols(cached.object_code)
    if undefined is None:
        raise NativeKernelsUnavailable("the cached object is not an ELF64 object")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # A symbol the process lacks would abort it inside LLVM's linker: check each first.
    missing = [name for name in undefined if not llvm.address_of_symbol(name)]
    if missing:
        raise NativeKernelsUnavailable(f"the object needs symbols this process lacks: {', '.join(missing)}")
    target = llvm.Target.from_triple(llvm.get_process_triple())
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target.create_target_machine())
    engine.add_object_file(llvm.ObjectFileRef.from_data(cached.object_code))
    engine.finalize_object()
    functions = {}
    for name, arg_types in ENTRIES.items():
        address = engine.get_function_address(cached.symbols[name])
        if not address:
            raise NativeKernelsUnavailable(f"the object has no entry {cached.symbols[name]}")
        c_args = [ctypes.c_int64 if t == "i64" else ctypes.c_void_p for t in arg_types]
        functions[name] = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, *c_args)(address)
    return NativeKernels(engine, functions, cached.constants)


def _pointer(array: np.ndarray, dtype: type, size: int) -> int:
    """The address of a C-contiguous array of ``size`` items of ``dtype``: anything else would be read wrong."""
    if array.dtype != dtype or array.size != size or not array.flags.c_contiguous:
        raise ValueError(
            f"a native kernel takes {size} C-contiguous {np.dtype(dtype)} here, not {array.size} {array.dtype}"
            f"{'' if array.flags.c_contiguous else ' (strided)'}"
        )
    return int(array.__array_interface__["data"][0])


class NativeKernels:
    """The kernels ``grid.py`` calls, with the signatures of ``kernels.py``'s: the one-pass ones run the loaded
    object code; any other attribute is numba's (``kernels.py``, imported on first use).

    The signatures stay flat because they are the numba kernels' own (``grid.py`` calls either through the same
    names), and those are flat for nopython mode and the C ABI: see the note above ``kernels.fit_bf16``."""

    def __init__(self, engine: Any, functions: dict[str, Any], constants: dict[str, int]) -> None:
        self._engine = engine  # owns the code's memory: it lives as long as this object
        self._functions = functions
        self._LANES = int(constants["lanes"])
        self._CHUNK_GROUPS = int(constants["chunk_groups"])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        from gemmaserve.checkpoint import kernels

        return getattr(kernels, name)

    def _call(self, name: str, *args: int) -> int:
        result = ctypes.c_int64(0)
        status = self._functions[name](ctypes.byref(result), *args)
        if status:  # an exception path of the kernel: a bug, never a result
            raise RuntimeError(f"checkpoint kernel {name} failed (status {status})")
        return int(result.value)

    def decode_bf16(self, bits: np.ndarray, out: np.ndarray) -> None:
        n = bits.size
        self._call("decode_bf16", _pointer(bits, np.uint16, n), _pointer(out, np.float32, n), n)

    def fit_bf16(
        self, values: np.ndarray, group: int, levels: np.ndarray, same: np.ndarray, steps: np.ndarray,
        ok: np.ndarray, peaks: np.ndarray, tiles: np.ndarray, ltile: np.ndarray, stile: np.ndarray,
        lanes: np.ndarray, ok_l: np.ndarray,
    ) -> None:  # fmt: skip
        n, tile = values.size, group * self._LANES
        if group < 1 or n % group:
            raise ValueError(f"{n} values are not groups of {group}")
        ng = n // group
        self._call(
            "fit_bf16", _pointer(values, np.float32, n), n, group, _pointer(levels, np.int8, n),
            _pointer(same, np.bool_, n), _pointer(steps, np.float32, ng), _pointer(ok, np.bool_, ng),
            _pointer(peaks, np.float32, ng), _pointer(tiles, np.float32, 2 * tile), _pointer(ltile, np.int8, tile),
            _pointer(stile, np.bool_, tile), _pointer(lanes, np.float32, 5 * self._LANES),
            _pointer(ok_l, np.bool_, self._LANES),
        )  # fmt: skip

    def search_bf16(
        self, values: np.ndarray, peaks: np.ndarray, steps: np.ndarray, levels: np.ndarray, found: np.ndarray,
        same: np.ndarray, trial_levels: np.ndarray, trial_same: np.ndarray,
    ) -> None:  # fmt: skip
        k, group = values.shape
        self._call(
            "search_bf16", _pointer(values, np.float32, k * group), k, group, _pointer(peaks, np.float32, k),
            _pointer(steps, np.float32, k), _pointer(levels, np.int8, k * group), _pointer(found, np.bool_, k),
            _pointer(same, np.bool_, k * group), _pointer(trial_levels, np.int8, group),
            _pointer(trial_same, np.bool_, group),
        )  # fmt: skip

    def repack_bf16(
        self, bits: np.ndarray, packed: np.ndarray, scales: np.ndarray, ok: np.ndarray, peaks: np.ndarray,
        scratch: np.ndarray, keys: np.ndarray,
    ) -> int:  # fmt: skip
        n = bits.size
        if n % 32:
            raise ValueError(f"{n} values are not groups of 32")
        ng, chunk = n // 32, self._CHUNK_GROUPS
        return self._call(
            "repack_bf16", _pointer(bits, np.uint16, n), n, _pointer(packed, np.uint8, n // 2),
            _pointer(scales, np.uint16, ng), _pointer(ok, np.bool_, ng), _pointer(peaks, np.float32, ng),
            _pointer(scratch, np.float32, 3 * chunk), _pointer(keys, np.uint16, chunk),
        )  # fmt: skip

    def check_packed_bf16(
        self, bits: np.ndarray, group: int, packed: np.ndarray, scales: np.ndarray, build_group: int,
        steps: np.ndarray, ok: np.ndarray, peaks: np.ndarray, scratch: np.ndarray, keys: np.ndarray,
        sums: np.ndarray, tops: np.ndarray, out: np.ndarray,
    ) -> None:  # fmt: skip
        n = bits.size
        if group < 32 or build_group < 32 or group % 32 or build_group % 32 or n % group or n % build_group:
            raise ValueError(f"{n} values are not groups of {group} and {build_group} (multiples of 32)")
        ng, chunk = n // group, self._CHUNK_GROUPS
        self._call(
            "check_packed_bf16", _pointer(bits, np.uint16, n), n, group, _pointer(packed, np.uint8, n // 2),
            _pointer(scales, np.uint16, n // build_group), build_group, _pointer(steps, np.float32, ng),
            _pointer(ok, np.bool_, ng), _pointer(peaks, np.float32, ng), _pointer(scratch, np.float32, 3 * chunk),
            _pointer(keys, np.uint16, chunk), _pointer(sums, np.float64, 8), _pointer(tops, np.int32, 32),
            _pointer(out, np.float64, len(COMPARISON_COUNTS)),
        )  # fmt: skip
