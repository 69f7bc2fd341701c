"""Google's QAT q4_0 grid, in pure numpy: recover each group's step, pack, unpack, compare.

The grid: groups of ``GROUP_SIZE`` weights along the input axis, each weight an
integer level in -8..7 times the group's (signed) step. The step of a group is
normally (signed element of largest |x|) / -8, exactly; when the peak sits at
another level the step is searched among peak/m for every level m, rounded to
the scale dtype (plus one ulp either side), and accepted only if every value of
the group reconstructs exactly as dtype(q * step). No I/O here.

For bf16 tensors the hot loops run in compiled kernels (``kernels.py``, numba) when
numba is installed; the one-pass ones load from a cached object through llvmlite
alone when they can (``native.py``: a bf16 repack or grid-check then never imports
numba), numba's dispatchers otherwise. The numpy code here is the reference implementation, the
fallback, and what the tests hold the kernels to (GEMMASERVE_CHECKPOINT_KERNEL=numpy
forces it; =numba-dispatch skips the cached object).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from gemmaserve.checkpoint.native_abi import COMPARISON_COUNTS
from gemmaserve.errors import MissingExtra

if TYPE_CHECKING:
    from gemmaserve.checkpoint.native import NativeKernels

# "auto" (default), "numba" (compiled, or fail), "numba-dispatch" (numba's dispatchers only) or "numpy"
KERNEL_ENV = "GEMMASERVE_CHECKPOINT_KERNEL"
Kernels: TypeAlias = "ModuleType | NativeKernels"  # the same kernel functions, loaded either way


@cache
def _import_kernels() -> ModuleType | None:
    try:
        from gemmaserve.checkpoint import kernels
    except ImportError:
        return None
    return kernels


native_failure: list[str] = []  # why the cached object was not used, when it was not (for a benchmark or a bug report)


@cache
def _load_native() -> NativeKernels | None:
    """The one-pass kernels from the cached object (built by numba on first use), or None if that fails in any way."""
    from importlib.util import find_spec

    if find_spec("numba") is None:  # nothing could build it, nor fall back: the numpy path
        return None
    try:
        from gemmaserve.checkpoint.native import load_kernels

        return load_kernels()
    except Exception as exc:  # fail closed: numba's dispatchers give the same results, only later
        native_failure.append(f"{type(exc).__name__}: {exc}")
        return None


def kernels() -> Kernels | None:
    """The compiled kernels, or None for the numpy path (numba missing, or GEMMASERVE_CHECKPOINT_KERNEL=numpy).

    The cached object's (``native.NativeKernels``: no numba import, ~0.05 s) unless it cannot be built or loaded or
    GEMMASERVE_CHECKPOINT_KERNEL=numba-dispatch, else ``kernels.py`` through numba's dispatchers (~0.5 s to import
    numba and load the first kernel). Same functions, same results either way.

    Raises:
        MissingExtra: GEMMASERVE_CHECKPOINT_KERNEL=numba (or numba-dispatch) without numba installed.
    """
    choice = os.environ.get(KERNEL_ENV, "auto")
    if choice == "numpy":
        return None
    if choice != "numba-dispatch" and (native := _load_native()) is not None:
        return native
    found = _import_kernels()
    if found is None and choice in ("numba", "numba-dispatch"):
        raise MissingExtra("numba", "numba", f"{KERNEL_ENV}={choice} (the compiled checkpoint kernels)")
    return found


def kernel_name() -> str:
    return "numba" if kernels() is not None else "numpy"


GROUP_SIZE = 32
LEVEL_MIN, LEVEL_MAX = -8, 7
# Fallback levels for the peak, largest |m| (smallest step) first.
_PEAK_LEVELS = (7, -7, 6, -6, 5, -5, 4, -4, 3, -3, 2, -2, 1, -1)
FLOAT_DTYPES = ("BF16", "F16", "F32")


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest, ties to even), as torch does; NaN stays NaN."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return rounded


_thread_scratch = threading.local()


def _scratch(name: str, n: int, dtype: type) -> np.ndarray:
    """A buffer of ``n`` items kept per thread and reused from block to block (see ``kernels.decode_bf16``)."""
    buffers: dict[tuple[str, type], np.ndarray] = _thread_scratch.__dict__.setdefault("buffers", {})
    buffer = buffers.get((name, dtype))
    if buffer is None or buffer.size < n:
        buffer = buffers[name, dtype] = np.empty(max(n, 1), dtype)
    return buffer[:n]


def decode_values(raw: np.ndarray, dtype: str, *, scratch: str | None = None) -> np.ndarray:
    """Stored values (BF16 as uint16 bits, F16, F32) as float32, exactly.

    ``scratch``: the result may live in this thread's buffer of that name, reused by its next call.
    """
    if dtype == "BF16":
        fast = kernels()
        if fast is not None and raw.ndim == 2 and raw.flags.c_contiguous:
            out = _scratch(scratch, raw.size, np.float32) if scratch else np.empty(raw.size, np.float32)
            fast.decode_bf16(raw.reshape(-1), out)
            return out.reshape(raw.shape)
        return bf16_bits_to_f32(raw)
    if dtype in ("F16", "F32"):
        return raw.astype(np.float32)
    raise ValueError(f"not a floating dtype for weights: {dtype}")


def encode_values(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values (already representable) in their stored form."""
    if dtype == "BF16":
        return f32_to_bf16_bits(values)
    if dtype == "F16":
        return values.astype("<f2")
    if dtype == "F32":
        return values.astype("<f4")
    raise ValueError(f"not a floating dtype: {dtype}")


def round_to_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 -> nearest value of ``dtype``, back in float32."""
    if dtype == "BF16":
        return bf16_bits_to_f32(f32_to_bf16_bits(values))
    if dtype == "F16":
        return values.astype(np.float16).astype(np.float32)
    return values.astype(np.float32)


def _next_value(values: np.ndarray, dtype: str, direction: int) -> np.ndarray:
    """The neighbouring value of ``dtype`` (one ulp away in magnitude, ``direction`` = +1 or -1)."""
    if dtype == "BF16":
        bits = f32_to_bf16_bits(values).astype(np.int32)
        return bf16_bits_to_f32(np.clip(bits + direction, 0, 0xFFFF).astype(np.uint16))
    if dtype == "F16":
        bits16 = values.astype(np.float16).view(np.uint16).astype(np.int32)
        return np.clip(bits16 + direction, 0, 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32)
    bits32 = values.astype(np.float32).view(np.uint32).astype(np.int64)
    return np.clip(bits32 + direction, 0, 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def reconstruct(levels: np.ndarray, steps: np.ndarray, model_dtype: str) -> np.ndarray:
    """dtype(q * step): the value a W4A16 kernel (or compressed-tensors) computes.

    The product is taken in float32 (exact for a 16-bit step; for a float32 step
    it rounds as torch's float32 multiply would) and rounded once to the model dtype.
    """
    return round_to_dtype(levels.astype(np.float32) * steps[..., None], model_dtype)


def _fit(groups: np.ndarray, steps: np.ndarray, model_dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Levels for ``steps``; whether each group reconstructs exactly (numerically); bitwise per value."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        safe = np.where(steps == 0, np.float32(1), steps)
        q = np.rint(groups / safe[..., None])
    q = np.where(steps[..., None] == 0, 0, q)
    finite = np.isfinite(q)
    q = np.where(finite, q, 0)
    clipped = np.clip(q, LEVEL_MIN, LEVEL_MAX) + np.float32(0)  # no -0.0 levels (see above)
    recon = reconstruct(clipped, steps, model_dtype)
    ok = (q == clipped) & finite & (recon == groups)
    return clipped.astype(np.int8), ok.all(axis=-1), recon.view(np.uint32) == groups.view(np.uint32)


def _fit_peak_at_minus_8(columns: np.ndarray, steps: np.ndarray, model_dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The hot path, on groups laid out as columns [group_size, n]: levels and bitwise equality.

    Columns, not rows, because numpy reduces and broadcasts along a leading axis
    an order of magnitude faster than along a short trailing one. Out-of-range
    levels need no separate test: a clipped level cannot reconstruct the stored
    value, so the equality check rejects it.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = columns * (np.float32(1) / steps)
    np.rint(q, out=q)
    np.clip(q, LEVEL_MIN, LEVEL_MAX, out=q)
    q += np.float32(0)  # -0.0 -> +0.0: the stored int8 level has no sign, so the check must not either
    product = q * steps
    if model_dtype == "BF16":
        u = product.view(np.uint32)
        carry = (u >> np.uint32(16)) & np.uint32(1)
        u += carry
        u += np.uint32(0x7FFF)
        u &= np.uint32(0xFFFF0000)
    elif model_dtype == "F16":
        product = product.astype(np.float16).astype(np.float32)
    same = product.view(np.uint32) == columns.view(np.uint32)
    return q, same


@dataclass(frozen=True, slots=True)
class GridFit:
    """The grid recovered for a block of rows.

    ``levels`` int8 [rows, cols]; ``steps`` float32 [rows, groups] (values of the
    scale dtype); ``on_grid`` [rows, groups]: every value reconstructs exactly as
    a number; ``peak_elsewhere`` marks on-grid groups whose step is not peak/-8;
    ``bit_exact`` [rows, cols] compares bits (a -0.0 stored where the step gives
    +0.0 is on the grid but not bit-exact).
    """

    levels: np.ndarray
    steps: np.ndarray
    on_grid: np.ndarray
    peak_elsewhere: np.ndarray
    bit_exact: np.ndarray


# Rows per pass, so that a pass's temporaries stay in the CPU cache.
_BLOCK_ELEMENTS = 1 << 17


def recover_grid(
    values: np.ndarray, *, model_dtype: str, scale_dtype: str | None = None, group_size: int = GROUP_SIZE,
    scratch: bool = False,
) -> GridFit:  # fmt: skip
    """Recover levels and per-group steps for float32 ``values`` [rows, cols] (cols % group_size == 0).

    ``scratch``: the fit's arrays may live in per-thread buffers that this thread's next call reuses.
    """
    rows, cols = values.shape
    if cols % group_size:
        raise ValueError(f"{cols} columns are not a multiple of the group size {group_size}")
    fast = kernels()
    if fast is not None and model_dtype == (scale_dtype or model_dtype) == "BF16" and group_size % 8 == 0:
        return _recover_block_compiled(fast, values, group_size, scratch=scratch)  # one sweep: no need to split
    block = max(1, _BLOCK_ELEMENTS // max(cols, 1))
    if rows <= block:
        return _recover_block(values, model_dtype, scale_dtype or model_dtype, group_size)
    parts = [
        _recover_block(values[r : r + block], model_dtype, scale_dtype or model_dtype, group_size)
        for r in range(0, rows, block)
    ]
    return GridFit(*(np.concatenate([getattr(p, f) for p in parts]) for f in GridFit.__slots__))


def _recover_block(values: np.ndarray, model_dtype: str, scale_dtype: str, group_size: int) -> GridFit:
    with np.errstate(all="ignore"):  # inf and NaN weights: off the grid, not a warning
        return _recover_block_numpy(values, model_dtype, scale_dtype, group_size)


def _recover_block_numpy(values: np.ndarray, model_dtype: str, scale_dtype: str, group_size: int) -> GridFit:
    rows, cols = values.shape
    n_groups = rows * (cols // group_size)
    columns = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(n_groups, group_size).T)
    top, bottom = columns.max(axis=0), columns.min(axis=0)
    peaks = np.where(-bottom >= top, bottom, top)
    steps = round_to_dtype(peaks * np.float32(-0.125), scale_dtype)
    zero = steps == 0
    if zero.any():  # an all-zero group: level 0, step 0 (the peak is 0, so every value is 0)
        q, same = _fit_peak_at_minus_8(columns, np.where(zero, np.float32(1), steps), model_dtype)
        q[:, zero] = 0
        same[:, zero] = columns[:, zero].view(np.uint32) == 0  # a -0.0 is on the grid, not bit-exact
        ok = same.all(axis=0) | zero
        steps[zero] = 0  # +0.0, so that 0 * step reconstructs +0.0
    else:
        q, same = _fit_peak_at_minus_8(columns, steps, model_dtype)
        ok = same.all(axis=0)
    levels = np.ascontiguousarray(q.astype(np.int8).T)
    same = np.ascontiguousarray(same.T)
    peak_elsewhere = np.zeros_like(ok)
    todo = np.flatnonzero(~ok)
    if len(todo):
        groups = columns.T
        _search_steps(groups, peaks, GridFit(levels, steps, ok, peak_elsewhere, same), todo, model_dtype, scale_dtype)
    shape = (rows, cols // group_size)
    return GridFit(
        levels.reshape(rows, cols),
        steps.reshape(shape),
        ok.reshape(shape),
        peak_elsewhere.reshape(shape),
        same.reshape(rows, cols),
    )


def _recover_block_compiled(fast: Kernels, values: np.ndarray, group_size: int, *, scratch: bool) -> GridFit:
    """The compiled peak-at--8 pass, then the same numpy step search for the groups it leaves off the grid."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    rows, cols = values.shape
    n, ng = rows * cols, rows * cols // group_size

    def array(name: str, size: int, dtype: type) -> np.ndarray:
        return _scratch(name, size, dtype) if scratch else np.empty(size, dtype)

    levels, same = array("levels", n, np.int8), array("same", n, np.bool_)
    steps, ok, peaks = array("steps", ng, np.float32), array("ok", ng, np.bool_), array("peaks", ng, np.float32)
    fast.fit_bf16(values.reshape(-1), group_size, levels, same, steps, ok, peaks, *_fit_scratch(fast, group_size))
    levels, same = levels.reshape(rows, cols), same.reshape(rows, cols)
    steps, ok, peaks = steps.reshape(rows, -1), ok.reshape(rows, -1), peaks.reshape(rows, -1)
    peak_elsewhere = np.zeros_like(ok)
    todo = np.flatnonzero(~ok)
    if len(todo):
        g = group_size
        with np.errstate(all="ignore"):
            per_group = GridFit(
                levels.reshape(-1, g),
                steps.reshape(-1),
                ok.reshape(-1),
                peak_elsewhere.reshape(-1),
                same.reshape(-1, g),
            )
            _search_steps(values.reshape(-1, g), peaks.reshape(-1), per_group, todo, "BF16", "BF16")
    return GridFit(levels, steps, ok, peak_elsewhere, same)


def _search_steps(
    groups: np.ndarray, peaks: np.ndarray, fit: GridFit, todo: np.ndarray, model_dtype: str, scale_dtype: str
) -> None:
    """For groups whose step is not peak/-8: try peak/m for every level m, nearest values first.

    A candidate that reconstructs every value bit for bit wins; failing that, one
    that reconstructs them as numbers (zeros of the other sign). Updates ``fit``'s arrays in place, taken
    one row per group (``groups`` [groups, group], ``peaks`` [groups]).
    """
    levels, steps, ok, peak_elsewhere, same = fit.levels, fit.steps, fit.on_grid, fit.peak_elsewhere, fit.bit_exact
    fast = kernels()
    if fast is not None and model_dtype == scale_dtype == "BF16":  # the same search, compiled (group by group)
        sub_steps, sub_levels, sub_same = steps[todo], levels[todo], same[todo]
        found = np.zeros(len(todo), dtype=bool)
        g = groups.shape[1]
        fast.search_bf16(
            _f32(groups[todo]), _f32(peaks[todo]), sub_steps, sub_levels, found, sub_same,
            _scratch("trial levels", g, np.int8), _scratch("trial same", g, np.bool_),
        )  # fmt: skip
        steps[todo], levels[todo], same[todo] = sub_steps, sub_levels, sub_same
        ok[todo] = found
        peak_elsewhere[todo] = found
        return
    sub, sub_peaks = groups[todo], peaks[todo].astype(np.float64)
    exact = np.zeros(len(todo), dtype=bool)
    numeric = np.zeros(len(todo), dtype=bool)
    best_steps, best_levels, best_same = steps[todo].copy(), levels[todo].copy(), same[todo].copy()
    for level in _PEAK_LEVELS:
        if exact.all():
            break
        base = round_to_dtype((sub_peaks / level).astype(np.float32), scale_dtype)
        for candidate in (base, _next_value(base, scale_dtype, -1), _next_value(base, scale_dtype, 1)):
            open_ = np.flatnonzero(~exact)
            cand_levels, cand_ok, cand_same = _fit(sub[open_], candidate[open_], model_dtype)
            cand_exact = cand_ok & cand_same.all(axis=-1)
            take = cand_exact | (cand_ok & ~numeric[open_])
            hit = open_[take]
            best_steps[hit] = candidate[hit]
            best_levels[hit] = cand_levels[take]
            best_same[hit] = cand_same[take]
            numeric[hit] = True
            exact[open_[cand_exact]] = True
    steps[todo], levels[todo], same[todo] = best_steps, best_levels, best_same
    ok[todo] = numeric
    peak_elsewhere[todo] = numeric


# --- fused passes on bf16 bits (compiled only) ----------------------------------------


def fused_bf16(model_dtype: str, scale_dtype: str) -> Kernels | None:
    """The compiled kernels when the one-pass paths apply (bf16 values, bf16 steps), else None."""
    fast = kernels()
    return fast if fast is not None and model_dtype == scale_dtype == "BF16" else None


@dataclass(frozen=True, slots=True)
class PackedBlock:
    """What ``pack_block_bf16`` found: values reconstructed bit for bit, groups whose step is not peak/-8,
    and the (flat) indices of groups on no grid."""

    bit_exact: int
    groups: int
    peak_elsewhere: int
    off_grid: np.ndarray


def pack_block_bf16(fast: Kernels, bits: np.ndarray, packed: np.ndarray, scales: np.ndarray) -> PackedBlock:
    """``recover_grid`` (groups of 32) + ``pack_int4`` + ``encode_values`` of bf16 ``bits`` [rows, cols] in one pass.

    Writes ``packed`` uint8 (the int32 words' little-endian bytes, rows*cols/2) and ``scales`` uint16 (the
    steps' bf16 bits, rows*cols/32); the groups whose peak is not at level -8 go through the numpy step
    search and are rewritten in both. An off-grid group's bytes are left undefined (the caller refuses the block).
    """
    flat = np.ascontiguousarray(bits).reshape(-1)
    ng = flat.size // GROUP_SIZE
    ok, peaks = _scratch("ok", ng, np.bool_), _scratch("peaks", ng, np.float32)
    bit_exact = int(fast.repack_bf16(flat, packed, scales, ok, peaks, *_kernel_scratch(fast)))
    todo = np.flatnonzero(~ok)
    if not len(todo):
        return PackedBlock(bit_exact, ng, 0, todo)
    found, levels, steps, same = _search_groups(flat.reshape(ng, GROUP_SIZE)[todo], peaks[todo])
    hit = todo[found]
    packed.reshape(ng, GROUP_SIZE // 2)[hit] = _pack_int4_numpy(levels[found]).view(np.uint8)
    scales[hit] = f32_to_bf16_bits(steps[found])
    return PackedBlock(bit_exact + int(same[found].sum()), ng, len(hit), todo[~found])


def compare_packed_block_bf16(
    fast: Kernels, bits: np.ndarray, group_size: int, packed: np.ndarray, scales: np.ndarray, build_group_size: int
) -> tuple[GridComparison, int, int]:
    """Recover the reference's grid and compare a pack-quantized build with it in one pass (``recover_grid`` then
    ``GridComparison.add_packed``): the counts, the groups on the grid and those whose step is not peak/-8.

    ``bits`` uint16 [rows, cols] reference; ``packed`` int32 [rows, cols/8]; ``scales`` uint16 [rows,
    cols/build_group_size] (bf16 bits); both group sizes multiples of 32.
    """
    rows, cols = bits.shape
    flat = np.ascontiguousarray(bits).reshape(-1)
    ng = flat.size // group_size
    steps, ok = _scratch("steps", ng, np.float32), _scratch("ok", ng, np.bool_)
    peaks = _scratch("peaks", ng, np.float32)
    out = np.zeros(len(COMPARISON_COUNTS), np.float64)
    packed_bytes = np.ascontiguousarray(packed).reshape(-1).view(np.uint8)
    fast.check_packed_bf16(
        flat, group_size, packed_bytes, np.ascontiguousarray(scales).reshape(-1), build_group_size, steps, ok, peaks,
        *_kernel_scratch(fast), _scratch("sums", 8, np.float64), _scratch("tops", 32, np.int32), out,
    )  # fmt: skip
    counts = GridComparison()
    counts._add_counts(_totals(out), (rows, cols), group_size)
    counts.values_not_finite = count_not_finite_bf16(bits, scales, build_group_size)
    todo = np.flatnonzero(~ok)
    if not len(todo):
        return counts, ng, 0
    found, _, searched, _ = _search_groups(flat.reshape(ng, group_size)[todo], peaks[todo])
    steps = steps[todo].copy()
    steps[found] = searched[found]
    reference = bf16_bits_to_f32(flat.reshape(ng, group_size)[todo])
    index = todo[:, None] * group_size + np.arange(group_size)
    nibbles = (packed_bytes[index // 2] >> ((index % 2) * 4).astype(np.uint8)) & np.uint8(0xF)
    scale_values = bf16_bits_to_f32(np.ascontiguousarray(scales).reshape(-1)[index // build_group_size])
    with np.errstate(all="ignore"):
        build = round_to_dtype((nibbles.astype(np.float32) - np.float32(8)) * scale_values, "BF16")
        diff = np.abs(build - reference)
        step = np.abs(steps)[:, None]
        counts.values_off_by_a_level_or_more += int(np.count_nonzero(np.where(step > 0, diff >= step, diff > 0)))
        counts.values_nearest_level_differs += count_nearest_level_differs(build, reference, steps[:, None])
    on_grid = ng - len(todo) + int(found.sum())
    return counts, on_grid, int(found.sum())


def count_not_finite_bf16(reference_bits: np.ndarray, scale_bits: np.ndarray, build_group_size: int) -> int:
    """Values whose reference (bf16 bits [rows, cols]) or build scale (bf16 bits [rows, groups]) is NaN or
    infinite: all exponent bits set."""
    exponent = np.uint16(0x7F80)
    bad_reference = (reference_bits & exponent) == exponent
    bad_scale = np.repeat((scale_bits & exponent) == exponent, build_group_size, axis=1)[:, : reference_bits.shape[1]]
    return int(np.count_nonzero(bad_reference | bad_scale))


def _search_groups(bits: np.ndarray, peaks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The numpy step search (bf16) for groups whose peak is not at level -8, given as bits [k, group]:
    (found, levels, steps, bit-for-bit flags)."""
    values = bf16_bits_to_f32(bits)
    k, group = values.shape
    found = np.zeros(k, np.bool_)
    levels, steps, same = np.zeros((k, group), np.int8), np.zeros(k, np.float32), np.zeros((k, group), np.bool_)
    with np.errstate(all="ignore"):
        steps[:] = round_to_dtype(peaks * np.float32(-0.125), "BF16")
        fit = GridFit(levels, steps, found, np.zeros(k, np.bool_), same)
        _search_steps(values, peaks, fit, np.arange(k), "BF16", "BF16")
    return found, levels, steps, same


def _kernel_scratch(fast: Kernels) -> tuple[np.ndarray, np.ndarray]:
    """This thread's scratch for the one-pass kernels: float32 [3, chunk] and the peak keys uint16 [chunk]."""
    chunk = int(fast._CHUNK_GROUPS)
    return _scratch("kernel", 3 * chunk, np.float32).reshape(3, chunk), _scratch("keys", chunk, np.uint16)


def _fit_scratch(fast: Kernels, group: int) -> tuple[np.ndarray, ...]:
    """This thread's scratch for ``fit_bf16``: the transposed tiles (values, products), levels, flags, lane values."""
    lanes = int(fast._LANES)
    return (
        _scratch("fit tiles", 2 * group * lanes, np.float32).reshape(2, group, lanes),
        _scratch("fit levels", group * lanes, np.int8).reshape(group, lanes),
        _scratch("fit same", group * lanes, np.bool_).reshape(group, lanes),
        _scratch("fit lanes", 5 * lanes, np.float32).reshape(5, lanes),
        _scratch("fit ok", lanes, np.bool_),
    )


Counts: TypeAlias = tuple[int, int, int, float, float, int]  # as ``native_abi.COMPARISON_COUNTS`` orders them


def _totals(out: np.ndarray) -> Counts:
    """A one-pass comparison's float64 counts as ``GridComparison._add_counts`` takes them (the max |diff| kept as
    bits)."""
    max_diff = np.array([int(out[3])], np.int32).view(np.float32)[0]
    return int(out[0]), int(out[1]), int(out[2]), float(max_diff), float(out[4]), int(out[5])


# --- which grid a reference sits on --------------------------------------------------

# A reference is recognised on a grid when at least this share of its groups reconstruct
# exactly. Google's exports sit on it entirely (a faithful repack refuses a single group
# off); the margin only tolerates a damaged group or two, while a plain bf16 model
# reconstructs almost none (a group of 32 random bf16 values is on no 16-level grid).
ON_GRID_MIN_SHARE = 0.99
# Rows of a tensor's first block that group-size detection looks at, at most; and the groups it wants
# per candidate size (fewer rows for larger groups: a failing size costs the full step search).
DETECT_ROWS = 16
DETECT_GROUPS = 256


@dataclass(frozen=True, slots=True)
class GroupSizeGuess:
    """The largest group size whose grid explains a sample, and the share of groups each tried size explained."""

    group_size: int | None  # None: no 4-bit grid explains the sample
    tried: dict[int, float]


def candidate_group_sizes(cols: int) -> list[int]:
    """32, 64, 128, … dividing ``cols``, then ``cols`` itself (one group per row: per channel)."""
    sizes, size = [], GROUP_SIZE
    while size < cols:
        if cols % size == 0:
            sizes.append(size)
        size *= 2
    return [*sizes, cols]


def detect_group_size(values: np.ndarray, *, model_dtype: str, scale_dtype: str | None = None) -> GroupSizeGuess:
    """The reference's own group size: the largest candidate on whose grid the sample ``values`` sit.

    Candidates go smallest first and stop at the first that fails: values on a grid
    of groups of 2g are also on one of groups of g (each half keeps the step, its peak
    at some level m, which the step search tries), so once g fails no larger size can pass.
    """
    tried: dict[int, float] = {}
    found: int | None = None
    cols = values.shape[1]
    for size in candidate_group_sizes(cols):
        rows = min(DETECT_ROWS, max(1, -(-DETECT_GROUPS * size // cols)))
        fit = recover_grid(values[:rows], model_dtype=model_dtype, scale_dtype=scale_dtype, group_size=size)
        tried[size] = float(fit.on_grid.mean()) if fit.on_grid.size else 0.0
        if tried[size] < ON_GRID_MIN_SHARE:
            break
        found = size
    return GroupSizeGuess(found, tried)


# --- compressed-tensors pack-quantized ---------------------------------------------


def pack_int4(levels: np.ndarray) -> np.ndarray:
    """int8 levels [rows, cols] -> int32 [rows, cols/8]; column 8j+k in bits 4k..4k+3 as q+8.

    Built bytewise (two nibbles per byte, little-endian words): the same bits as
    compressed-tensors' ``pack_to_int32``, without a reduction over a short axis.
    """
    fast = kernels()
    if fast is not None and levels.flags.c_contiguous:
        return fast.pack_int4(levels)  # type: ignore[no-any-return]
    return _pack_int4_numpy(levels)


def _pack_int4_numpy(levels: np.ndarray) -> np.ndarray:
    rows, cols = levels.shape
    u = (levels.view(np.uint8) + np.uint8(8)) & np.uint8(0xF)  # two's complement q -> q+8 (mod 16)
    packed_bytes = u[:, 0::2] | (u[:, 1::2] << np.uint8(4))
    return np.ascontiguousarray(packed_bytes).view("<i4").reshape(rows, cols // 8).astype(np.int32, copy=False)


def unpack_int4(packed: np.ndarray, cols: int) -> np.ndarray:
    """int32 [rows, cols/8] -> int8 levels [rows, cols]; the inverse of ``pack_int4``."""
    rows = packed.shape[0]
    b = np.ascontiguousarray(packed).astype("<i4", copy=False).view(np.uint8).reshape(rows, -1)
    out = np.empty((rows, b.shape[1] * 2), dtype=np.uint8)
    out[:, 0::2] = b & np.uint8(0xF)
    out[:, 1::2] = b >> np.uint8(4)
    return (out[:, :cols] - np.uint8(8)).view(np.int8)


def dequantize_pack_quantized(
    packed: np.ndarray, scales: np.ndarray, *, cols: int, group_size: int, model_dtype: str
) -> np.ndarray:
    """W4A16 pack-quantized rows -> float32 values: dtype(q * scale). ``scales`` float32 [rows, cols/group]."""
    levels = unpack_int4(packed, cols).reshape(packed.shape[0], cols // group_size, group_size)
    return reconstruct(levels.astype(np.float32), scales, model_dtype).reshape(packed.shape[0], cols)


# --- AutoAWQ GEMM -------------------------------------------------------------------

# AutoAWQ packs output columns 8j + [0, 2, 4, 6, 1, 3, 5, 7] into nibbles 0..7 of word j.
AWQ_PACK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
_AWQ_NIBBLE_OF_COLUMN = np.argsort(np.array(AWQ_PACK_ORDER))


def unpack_awq(packed: np.ndarray) -> np.ndarray:
    """AutoAWQ GEMM int32 [k, n/8] -> uint8 nibbles [k, n] in column order."""
    words = np.ascontiguousarray(packed).astype("<i4").view(np.uint32)
    shifts = np.arange(0, 32, 4, dtype=np.uint32)
    nibbles = ((words[..., None] >> shifts) & np.uint32(0xF)).astype(np.uint8)
    return nibbles[..., _AWQ_NIBBLE_OF_COLUMN].reshape(packed.shape[0], -1)


def pack_awq(nibbles: np.ndarray) -> np.ndarray:
    """uint8 [k, n] (values 0..15) -> AutoAWQ GEMM int32 [k, n/8] (for building test builds)."""
    k, n = nibbles.shape
    ordered = nibbles.reshape(k, n // 8, 8)[..., list(AWQ_PACK_ORDER)].astype(np.uint32)
    shifts = np.arange(0, 32, 4, dtype=np.uint32)
    return np.ascontiguousarray(np.bitwise_or.reduce(ordered << shifts, axis=-1)).view(np.int32)


def dequantize_awq(qweight: np.ndarray, qzeros: np.ndarray, scales: np.ndarray, *, group_size: int) -> np.ndarray:
    """AutoAWQ GEMM (in-features rows) -> float32 [out, in] values: fp16((q - z) * s).

    ``scales`` float32 [in/group, out]; AutoAWQ computes in float16.
    """
    q = unpack_awq(qweight).astype(np.float32)
    z = np.repeat(unpack_awq(qzeros).astype(np.float32), group_size, axis=0)[: q.shape[0]]
    s = np.repeat(scales, group_size, axis=0)[: q.shape[0]]
    return round_to_dtype((q - z) * s, "F16").T.copy()


# --- comparison ---------------------------------------------------------------------


def nearest_levels(values: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Each value's nearest level of its group's grid {q * step : q in -8..7}: rint(value / step) clipped, the even
    level on a tie. In float64, where the quotient of two float32 values never rounds onto or off a half."""
    with np.errstate(all="ignore"):
        safe = np.where(steps == 0, 1.0, steps.astype(np.float64))
        return np.clip(np.rint(values.astype(np.float64) / safe), LEVEL_MIN, LEVEL_MAX)


def count_nearest_level_differs(build: np.ndarray, reference: np.ndarray, steps: np.ndarray) -> int:
    """Values whose nearest level of the reference group's grid is not the reference value's own (``steps``
    broadcast to the values, signed). A zero step's grid has one level: any change at all moves off it. NaN and
    infinite values (or steps) are not counted: ``values_not_finite`` names them."""
    measured = np.isfinite(build) & np.isfinite(reference) & np.isfinite(steps)
    moved = np.where(steps == 0, build != reference, nearest_levels(build, steps) != nearest_levels(reference, steps))
    return int(np.count_nonzero(moved & measured))


@dataclass(slots=True)
@dataclass(frozen=True)
class PackedWeights:
    """A pack-quantized build block: int32 words [rows, cols/8] and a float32 scale per ``group_size`` values
    (stored as ``scale_dtype``)."""

    packed: np.ndarray
    scales: np.ndarray
    group_size: int
    scale_dtype: str


class GridComparison:
    """Running counts of a build against the reference, accumulated block by block."""

    # the counts that add up from block to block (and from tensor to tensor); the two differences do not
    COUNTS = (
        "values",
        "values_bit_identical",
        "groups",
        "groups_bit_identical",
        "values_off_by_a_level_or_more",
        "values_nearest_level_differs",
        "values_not_finite",
    )

    values: int = 0
    values_bit_identical: int = 0
    groups: int = 0
    groups_bit_identical: int = 0
    values_off_by_a_level_or_more: int = 0
    values_nearest_level_differs: int = 0
    max_abs_diff: float = 0.0
    sum_abs_diff: float = 0.0
    # NaN or infinite in the build or the reference: every comparison with them is false, so they would
    # otherwise pass as "not off the grid". Counted apart; any makes the verdict "invalid".
    values_not_finite: int = 0

    def add(self, build: np.ndarray, reference: np.ndarray, reference_steps: np.ndarray, group_size: int) -> None:
        fast = kernels()
        self.values_not_finite += int(np.count_nonzero(~(np.isfinite(build) & np.isfinite(reference))))
        if fast is not None and group_size % 32 == 0:
            self._add_counts(
                fast.compare(_f32(build), _f32(reference), _f32(reference_steps), group_size),
                reference.shape,
                group_size,
            )
            return
        self._add_numpy(build, reference, reference_steps, group_size)

    def add_packed(
        self, weights: PackedWeights, reference: np.ndarray, reference_steps: np.ndarray, group_size: int
    ) -> None:
        """``add`` for a pack-quantized build block, dequantized as dtype(q * scale)."""
        packed, scales, build_group_size = weights.packed, weights.scales, weights.group_size
        scale_dtype = weights.scale_dtype
        cols = reference.shape[1]
        fast = kernels()
        bad_scale = np.repeat(~np.isfinite(scales), build_group_size, axis=1)[:, :cols]
        self.values_not_finite += int(np.count_nonzero(bad_scale | ~np.isfinite(reference)))
        if fast is not None and scale_dtype == "BF16" and build_group_size % 8 == 0 and group_size % 32 == 0:
            counts = fast.compare_packed(
                np.ascontiguousarray(packed, dtype=np.int32), _f32(scales), build_group_size,
                _f32(reference), _f32(reference_steps), group_size,
            )  # fmt: skip
            self._add_counts(counts, reference.shape, group_size)
            return
        with np.errstate(invalid="ignore", over="ignore"):  # 0 * inf is NaN: counted in values_not_finite above
            build = dequantize_pack_quantized(
                packed, scales, cols=cols, group_size=build_group_size, model_dtype=scale_dtype
            )
        self._add_numpy(build, reference, reference_steps, group_size)

    def merge(self, other: GridComparison) -> None:
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_abs_diff = max(self.max_abs_diff, other.max_abs_diff)
        self.sum_abs_diff += other.sum_abs_diff

    def _add_counts(self, counts: Counts, shape: tuple[int, ...], group_size: int) -> None:
        identical, groups_identical, off, max_diff, sum_diff, differs = counts
        rows, cols = shape
        self.values += rows * cols
        self.values_bit_identical += int(identical)
        self.groups += rows * (cols // group_size)
        self.groups_bit_identical += int(groups_identical)
        self.values_off_by_a_level_or_more += int(off)
        self.values_nearest_level_differs += int(differs)
        self.max_abs_diff = max(self.max_abs_diff, float(max_diff))
        self.sum_abs_diff += float(sum_diff)

    def _add_numpy(
        self, build: np.ndarray, reference: np.ndarray, reference_steps: np.ndarray, group_size: int
    ) -> None:
        rows, cols = reference.shape
        shape = (rows, cols // group_size, group_size)
        same = (build.view(np.uint32) == reference.view(np.uint32)).reshape(shape)
        # float32 differences of two 16-bit values are exact (or within one float32 ulp for F32 builds).
        diff = np.abs(build - reference).reshape(shape)
        step = np.abs(reference_steps)[..., None]
        # A zero step (all-zero group): any change at all is off the grid.
        off = np.where(step > 0, diff >= step, diff > 0)
        self.values += same.size
        self.values_bit_identical += int(np.count_nonzero(same))
        self.groups += rows * (cols // group_size)
        self.groups_bit_identical += int(np.count_nonzero(same.all(axis=-1)))
        self.values_off_by_a_level_or_more += int(np.count_nonzero(off))
        self.values_nearest_level_differs += count_nearest_level_differs(
            build.reshape(shape), reference.reshape(shape), reference_steps[..., None]
        )
        if diff.size and not np.isnan(diff).all():  # an all-NaN block (a NaN scale) has no largest difference
            self.max_abs_diff = max(self.max_abs_diff, float(np.nanmax(diff)))
            self.sum_abs_diff += float(np.nansum(diff, dtype=np.float64))

    @property
    def mean_abs_diff(self) -> float:
        return self.sum_abs_diff / self.values if self.values else 0.0


def _f32(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.float32)
