"""Compiled (numba) versions of the grid's hot loops, for bf16 checkpoints: one pass per block instead of ~15.

Optional: imported only through ``grid.kernels()`` when numba is installed
(``pip install "gemmaserve[numba]"``). Each kernel does, value by value, the same
float32 operations in the same order as the numpy code in ``grid.py`` (which stays the
reference implementation and the fallback), so levels, steps and counts are
identical; only the float64 sum of |diff| is added in another order. Kernels
release the GIL, so row blocks run on several threads. No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numba import njit  # type: ignore[import-untyped, unused-ignore]

F = TypeVar("F", bound=Callable[..., Any])


def _jit(fn: F) -> F:
    return cast(F, njit(nogil=True, cache=True, boundscheck=False)(fn))


def _jit_sum(fn: F) -> F:
    """For the comparison only: lets the float64 sum of |diff| be vectorized (added in another order than numpy's)."""
    return cast(F, njit(nogil=True, cache=True, boundscheck=False, fastmath={"reassoc"})(fn))

_ABS = 0x7FFFFFFF
_INF = 0x7F800000
# Eight bool/int8 "equal" flags read as one 64-bit word. A numpy uint64, not a Python int: numba compares
# uint64 with int64 as float64, which loses the low bytes.
_ALL_EQUAL = np.uint64(0x0101010101010101)
_NEG_INF_KEY = -2139095041  # the order key of -inf's bits (see _key): a smaller key is a negative NaN


@_jit
def _bf16_round_bits(u: Any) -> Any:
    """float32 bits -> the bits of the nearest bf16 (ties to even; a NaN stays a quiet NaN), as float32 bits."""
    nan = (u & _ABS) > _INF
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    quiet = ((u >> 16) | 0x40) << 16
    return np.uint32(quiet if nan else rounded)


@_jit
def decode_bf16(bits: Any, out: Any) -> Any:
    """uint16 bf16 bits [rows, cols] -> float32 values, into ``out`` (same shape).

    Outputs come from the caller, here and below: arrays allocated inside a kernel come
    from fresh pages on every call (a page fault per 4 KiB, as much system time as the work).
    """
    o = out.reshape(-1).view(np.uint32)
    b = bits.reshape(-1)
    for i in range(b.size):
        o[i] = np.uint32(b[i]) << 16
    return out


@_jit
def fit_bf16(values: Any, group: int, levels: Any, same: Any, product: Any, steps: Any, ok: Any, peaks: Any) -> None:
    """The peak-at-level--8 pass of ``grid._recover_block`` for a bf16 model and bf16 scales.

    ``group`` is a multiple of 8. Writes levels int8, same (bitwise) bool and the float32
    products (scratch), one per value, and steps float32, ok bool and peaks float32 (for
    the step search), one per group (1-D arrays). The group's max and min are taken on order
    keys of the float bits (integer reductions vectorize; float ones do not without
    fast-math): they pick the same values as numpy's max and min, except which zero
    when the peak is zero, and such a group is all zeros, with step 0 either way.
    "same" is computed over the whole block and read per group eight flags at a time.
    """
    rows, cols = values.shape
    n = rows * cols
    ng = n // group
    flat = values.reshape(-1)
    ibits = flat.view(np.int32)
    ubits = flat.view(np.uint32)
    pbits = product.view(np.uint32)
    scratch = np.empty(2, np.float32)
    sbits = scratch.view(np.int32)
    for gi in range(ng):
        base = gi * group
        top = np.int32(-2147483648)
        bottom = np.int32(2147483647)
        for j in range(base, base + group):
            b = ibits[j]
            key = b if b >= 0 else b ^ 0x7FFFFFFF
            top = max(top, key)
            bottom = min(bottom, key)
        if top > _INF or bottom < _NEG_INF_KEY:  # a NaN: numpy's max and min propagate it, so does the peak
            scratch[0] = np.float32(np.nan)
        else:
            sbits[0] = top if top >= 0 else top ^ 0x7FFFFFFF
            sbits[1] = bottom if bottom >= 0 else bottom ^ 0x7FFFFFFF
            scratch[0] = scratch[1] if -scratch[1] >= scratch[0] else scratch[0]
        peak = scratch[0]
        peaks[gi] = peak
        scratch[1] = peak * np.float32(-0.125)
        sbits[1] = np.int32(_bf16_round_bits(np.uint32(sbits[1])))
        step = scratch[1]
        if step == 0:  # an all-zero group: level 0, step +0.0 ("same" then reads bits == 0: a -0.0 is not bit-exact)
            steps[gi] = np.float32(0)
            for j in range(base, base + group):
                levels[j] = 0
                product[j] = np.float32(0)
            continue
        steps[gi] = step
        inv = np.float32(1) / step
        for j in range(base, base + group):
            q = np.rint(flat[j] * inv)
            q = np.float32(-8) if q < np.float32(-8) else q
            q = np.float32(7) if q > np.float32(7) else q
            q = q + np.float32(0)  # -0.0 -> +0.0, as the numpy pass does
            product[j] = q * step
            levels[j] = np.int8(q)
    for j in range(n):
        u = pbits[j]
        same[j] = ((u + ((u >> 16) & 1) + 0x7FFF) & 0xFFFF0000) == ubits[j]
    words = same.view(np.uint64)
    per_group = group // 8
    for gi in range(ng):
        all_same = True
        for w in range(gi * per_group, (gi + 1) * per_group):
            all_same &= words[w] == _ALL_EQUAL
        ok[gi] = all_same or steps[gi] == 0  # an all-zero group is on the grid whatever the sign of its zeros


@_jit_sum
def _compare_row(value: Any, reference: Any, steps: Any, group: int, scratch: Any, out: Any) -> None:
    """Adds one row's counts to ``out``: [bit-identical, groups bit-identical, off by a level,
    max |diff| (as its bits), float64 sum of |diff| with NaN left out as numpy's nansum does].

    Loops run the whole row, or exactly 32 values (per-group reductions over a variable
    count cost more than the work): each group's |step| is written out per value, the
    per-group "all identical" test reads eight equality flags as one 64-bit word.
    A zero step becomes the smallest float32 above zero, so that ``diff >= step`` reads
    ``diff > 0`` there, as in numpy's comparison.
    """
    cols = reference.size
    diff, eq, step_of = scratch
    vbits = value.view(np.int32)
    rbits = reference.view(np.int32)
    identical = 0
    for j in range(cols):
        hit = vbits[j] == rbits[j]
        eq[j] = hit
        identical += hit
        diff[j] = abs(value[j] - reference[j])
    words = eq.view(np.uint64)
    groups_identical = 0
    tiny = np.float32(1e-45)
    for g in range(cols // group):
        step = abs(steps[g])
        step = step if step > 0 else tiny
        all_same = True
        for base in range(g * group, (g + 1) * group, 32):
            for lane in range(32):
                step_of[base + lane] = step
            w = base // 8
            all_same &= (words[w] == _ALL_EQUAL) & (words[w + 1] == _ALL_EQUAL)
            all_same &= (words[w + 2] == _ALL_EQUAL) & (words[w + 3] == _ALL_EQUAL)
        groups_identical += all_same
    dbits = diff.view(np.int32)
    off = 0
    max_bits = np.int32(0)
    total = 0.0
    for j in range(cols):
        d = diff[j]
        off += d >= step_of[j]
        b = dbits[j]  # |diff| >= 0: its bits order as its value; a NaN's bits are above inf's
        max_bits = max(max_bits, b if b <= np.int32(_INF) else np.int32(0))
        total += np.float64(d) if d == d else 0.0
    out[0] += identical
    out[1] += groups_identical
    out[2] += off
    out[3] = max(out[3], max_bits)
    out[4] += total


@_jit
def _row_scratch(cols: int) -> Any:
    return np.empty(cols, np.float32), np.empty(cols, np.int8), np.empty(cols, np.float32)


@_jit
def compare(build: Any, reference: Any, steps: Any, group: int) -> Any:
    """``grid.GridComparison.add`` for float32 build values [rows, cols] (``group`` a multiple of 32):
    (bit-identical, groups bit-identical, off by a level, max |diff|, sum |diff|)."""
    rows, cols = reference.shape
    scratch = _row_scratch(cols)
    out = np.zeros(5, np.float64)
    for row in range(rows):
        _compare_row(build[row], reference[row], steps[row], group, scratch, out)
    return _totals(out)


@_jit
def _totals(out: Any) -> Any:
    max_diff = np.empty(1, np.int32)
    max_diff[0] = np.int32(out[3])
    return np.int64(out[0]), np.int64(out[1]), np.int64(out[2]), max_diff.view(np.float32)[0], out[4]


@_jit
def compare_packed(packed: Any, scales: Any, build_group: int, reference: Any, steps: Any, group: int) -> Any:
    """``compare`` of a pack-quantized build with bf16 scales, dequantized row by row as bf16(q * scale).

    ``build_group`` must be a multiple of 8 (one int32 word never spans two scales).
    """
    rows, cols = reference.shape
    value = np.empty(cols, np.float32)
    vbits = value.view(np.uint32)
    scratch = _row_scratch(cols)
    out = np.zeros(5, np.float64)
    nibbles = packed.view(np.uint8)
    for row in range(rows):
        for b in range(cols // 2):  # byte b holds column 2b in its low nibble, 2b+1 in its high one, as q+8
            byte = nibbles[row, b]
            value[2 * b] = np.float32(np.int32(byte & 0xF) - 8)
            value[2 * b + 1] = np.float32(np.int32(byte >> 4) - 8)
        for bg in range(cols // build_group):
            scale = scales[row, bg]
            for base in range(bg * build_group, (bg + 1) * build_group, 8):
                for lane in range(8):
                    value[base + lane] *= scale
        for j in range(cols):
            vbits[j] = _bf16_round_bits(vbits[j])
        _compare_row(value, reference[row], steps[row], group, scratch, out)
    return _totals(out)


@_jit
def pack_int4(levels: Any) -> Any:
    """int8 levels [rows, cols] -> int32 [rows, cols/8]: column 8j+k in bits 4k..4k+3 as q+8 (``grid.pack_int4``)."""
    rows, cols = levels.shape
    out = np.empty((rows, cols // 8), np.uint32)
    for row in range(rows):
        for w in range(cols // 8):
            word = np.uint32(0)
            for k in range(8):
                word |= np.uint32((np.int32(levels[row, 8 * w + k]) + 8) & 0xF) << (4 * k)
            out[row, w] = word
    return out.view(np.int32)
