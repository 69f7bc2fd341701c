"""Builds the object code that ``native.py`` loads: the one-pass kernels of ``kernels.py`` behind C entry points.

numba compiles one ``cfunc`` per entry of ``native_abi.ENTRIES`` (pointers and sizes in, ``carray`` views, the
kernels called as they are); their LLVM modules are linked into one, each entry gets a shim that returns
numba's status instead of numba's error handler (which reaches for the GIL and the Python C API), everything
else is made internal and what no entry reaches is dropped, and the module is emitted with the target machine
numba uses for its own cached objects. Imported only to build (it imports numba); writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cfunc as _cfunc  # type: ignore[import-untyped, unused-ignore]
from numba import types  # type: ignore[import-untyped, unused-ignore]
from numba.np.numpy_support import carray  # type: ignore[import-untyped, unused-ignore]

from gemmaserve.checkpoint import kernels
from gemmaserve.checkpoint.native_abi import ENTRIES, entry_symbol, undefined_symbols

_LANES, _CHUNK = kernels._LANES, kernels._CHUNK_GROUPS
cfunc: Any = _cfunc
_pointer: Any = types.CPointer
_NUMBA_TYPES: dict[str, Any] = {
    "i64": types.int64,
    "u16*": _pointer(types.uint16),
    "u8*": _pointer(types.uint8),
    "i8*": _pointer(types.int8),
    "i32*": _pointer(types.int32),
    "f32*": _pointer(types.float32),
    "f64*": _pointer(types.float64),
    "bool*": _pointer(types.boolean),
}


# The entries' bodies: C arguments -> arrays -> the kernel. Sizes derive from the value count as the callers'
# arrays do (``native.NativeKernels`` checks them before a call).
def _decode_bf16(bits: Any, out: Any, n: int) -> int:
    kernels.decode_bf16(carray(bits, n), carray(out, n))
    return 0


# One C entry point per kernel, one pointer or integer per argument (the ABI ``native.py`` calls through ctypes):
# flat by necessity, see the note above ``kernels.fit_bf16``.
def _fit_bf16(
    values: Any, n: int, group: int, levels: Any, same: Any, steps: Any, ok: Any, peaks: Any, tiles: Any,
    ltile: Any, stile: Any, lanes: Any, ok_l: Any,
) -> int:  # fmt: skip
    ng = n // group
    kernels.fit_bf16(
        carray(values, n), group, carray(levels, n), carray(same, n), carray(steps, ng), carray(ok, ng),
        carray(peaks, ng), carray(tiles, (2, group, _LANES)), carray(ltile, (group, _LANES)),
        carray(stile, (group, _LANES)), carray(lanes, (5, _LANES)), carray(ok_l, _LANES),
    )  # fmt: skip
    return 0


def _search_bf16(
    values: Any, k: int, group: int, peaks: Any, steps: Any, levels: Any, found: Any, same: Any,
    trial_levels: Any, trial_same: Any,
) -> int:  # fmt: skip
    kernels.search_bf16(
        carray(values, (k, group)), carray(peaks, k), carray(steps, k), carray(levels, (k, group)), carray(found, k),
        carray(same, (k, group)), carray(trial_levels, group), carray(trial_same, group),
    )  # fmt: skip
    return 0


def _repack_bf16(bits: Any, n: int, packed: Any, scales: Any, ok: Any, peaks: Any, scratch: Any, keys: Any) -> int:
    ng = n // 32
    return kernels.repack_bf16(
        carray(bits, n), carray(packed, n // 2), carray(scales, ng), carray(ok, ng), carray(peaks, ng),
        carray(scratch, (3, _CHUNK)), carray(keys, _CHUNK),
    )  # fmt: skip


def _check_packed_bf16(
    bits: Any, n: int, group: int, packed: Any, scales: Any, build_group: int, steps: Any, ok: Any, peaks: Any,
    scratch: Any, keys: Any, sums: Any, tops: Any, out: Any,
) -> int:  # fmt: skip
    ng = n // group
    kernels.check_packed_bf16(
        carray(bits, n), group, carray(packed, n // 2), carray(scales, n // build_group), build_group,
        carray(steps, ng), carray(ok, ng), carray(peaks, ng), carray(scratch, (3, _CHUNK)), carray(keys, _CHUNK),
        carray(sums, 8), carray(tops, 32), carray(out, 5),
    )  # fmt: skip
    return 0


_BODIES = {
    "decode_bf16": _decode_bf16,
    "fit_bf16": _fit_bf16,
    "search_bf16": _search_bf16,
    "repack_bf16": _repack_bf16,
    "check_packed_bf16": _check_packed_bf16,
}


@dataclass(frozen=True, slots=True)
class BuiltKernels:
    """The object code, its entries' symbols and the kernels' scratch sizes."""

    object_code: bytes
    symbols: dict[str, str]
    constants: dict[str, int]


def build_kernels() -> BuiltKernels:
    """Compile the entries and emit one object file.

    Raises:
        RuntimeError: the object would need a symbol outside libc and libm (numba's runtime or the Python C
            API): loading it would abort the process, so it is refused.
    """
    import llvmlite.binding as llvm  # type: ignore[import-untyped, unused-ignore]

    linked: Any = None
    inner: dict[str, str] = {}
    target_machine: Any = None
    for name, arg_types in ENTRIES.items():
        signature = types.int64(*(_NUMBA_TYPES[t] for t in arg_types))
        compiled = cfunc(signature, error_model="numpy")(_BODIES[name])
        prefix = "cfunc."  # numba names the C wrapper "cfunc." + the numba-ABI function it calls
        if not compiled.native_name.startswith(prefix):
            raise RuntimeError(f"unexpected numba cfunc symbol {compiled.native_name!r}")
        inner[name] = compiled.native_name[len(prefix) :]
        library = compiled._library
        target_machine = library.codegen._tm
        module = llvm.parse_assembly(library.get_llvm_str())
        if linked is None:
            linked = module
        else:
            linked.link_in(module)
    shims = []
    for name, callee in inner.items():
        llvm_types = [str(a.type) for a in linked.get_function(callee).arguments]
        c_args = ", ".join(f"{t} %a{i}" for i, t in enumerate(llvm_types[2:]))
        # numba's ABI: (return slot, exception slot, arguments...) -> status; the shim hands the status back.
        shims.append(
            f'declare i32 @"{callee}"({", ".join(llvm_types)})\n'
            f'define i32 @"{entry_symbol(name)}"(ptr %ret, {c_args}) {{\n'
            f"  %exc = alloca ptr\n"
            f'  %status = call i32 @"{callee}"(ptr %ret, ptr %exc, {c_args})\n'
            f"  ret i32 %status\n}}\n"
        )
    shim_module = llvm.parse_assembly("\n".join(shims))
    shim_module.triple, shim_module.data_layout = linked.triple, linked.data_layout
    linked.link_in(shim_module)
    keep = {entry_symbol(name) for name in ENTRIES}
    for value in [*linked.functions, *linked.global_variables]:
        if not value.is_declaration and value.name not in keep:
            value.linkage = "internal"
    passes = llvm.create_new_module_pass_manager()
    # Internal now, the kernels are only reached from the entries, whose arrays have no meminfo (carray): constant
    # propagation across calls lets numba's reference counting fold away, and with it its runtime's symbols.
    passes.add_ipsccp_pass()
    passes.add_global_dead_code_eliminate_pass()
    passes.add_strip_dead_prototype_pass()
    passes.run(linked, llvm.create_pass_builder(target_machine, llvm.create_pipeline_tuning_options(speed_level=0)))
    linked.verify()
    object_code = target_machine.emit_object(linked)
    undefined = undefined_symbols(object_code)
    if undefined is None:
        raise RuntimeError("the object code is not ELF64: its symbols cannot be checked before loading")
    foreign = [s for s in undefined if not _libc_or_libm(s)]
    if foreign:
        raise RuntimeError(f"the kernels' object code needs symbols outside libc and libm: {', '.join(foreign)}")
    symbols = {name: entry_symbol(name) for name in ENTRIES}
    return BuiltKernels(object_code, symbols, {"lanes": _LANES, "chunk_groups": _CHUNK})


_LIBC = {"memset", "memcpy", "memmove", "memcmp"}
_LIBM_STEMS = {"sqrt", "exp", "exp2", "log", "log2", "log10", "pow", "fmod", "rint", "floor", "ceil", "trunc", "round"}


def _libc_or_libm(symbol: str) -> bool:
    """A symbol libc or libm provides (the backend may call memset for a loop that clears, or a libm function)."""
    return symbol in _LIBC or symbol in _LIBM_STEMS or (symbol.endswith("f") and symbol[:-1] in _LIBM_STEMS)
