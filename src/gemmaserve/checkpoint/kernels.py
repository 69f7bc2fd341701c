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


_LANES = 64  # groups per tile in fit_bf16


@_jit
def fit_bf16(values: Any, group: int, levels: Any, same: Any, steps: Any, ok: Any, peaks: Any) -> None:
    """The peak-at-level--8 pass of ``grid._recover_block`` for a bf16 model and bf16 scales.

    Writes levels int8 and same (bitwise) bool, one per value, and steps float32, ok bool
    and peaks float32 (for the step search), one per group (1-D arrays). Groups are taken ``_LANES`` at a time and
    transposed, so that each SIMD lane carries one group: max, min, level and compare
    run down the lanes with no per-group horizontal reduction (measured 20% faster than
    one group after another). The group's max and min are taken on order keys of the
    float bits (integer reductions vectorize; float ones do not without fast-math): they
    pick the same values as numpy's max and min, except which zero when the peak is
    zero, and such a group is all zeros, with step 0 either way.
    """
    flat = values.reshape(-1)
    n = flat.size
    ng = n // group
    tile = np.empty((group, _LANES), np.float32)
    tbits = tile.view(np.int32)
    ptile = np.empty((group, _LANES), np.float32)
    pbits = ptile.view(np.int32)
    ltile = np.empty((group, _LANES), np.int8)
    stile = np.empty((group, _LANES), np.bool_)
    top = np.empty(_LANES, np.int32)
    bottom = np.empty(_LANES, np.int32)
    step_l = np.empty(_LANES, np.float32)
    inv_l = np.empty(_LANES, np.float32)
    ok_l = np.empty(_LANES, np.bool_)
    scratch = np.empty(2, np.float32)
    sbits = scratch.view(np.int32)
    for g0 in range(0, ng, _LANES):
        m = min(_LANES, ng - g0)
        for lane in range(m):
            base = (g0 + lane) * group
            for j in range(group):
                tile[j, lane] = flat[base + j]
        for lane in range(_LANES):
            top[lane] = np.int32(-2147483648)
            bottom[lane] = np.int32(2147483647)
        for j in range(group):
            for lane in range(_LANES):
                b = tbits[j, lane]
                key = b if b >= np.int32(0) else b ^ np.int32(0x7FFFFFFF)
                top[lane] = max(top[lane], key)
                bottom[lane] = min(bottom[lane], key)
        for lane in range(m):
            t, bt = top[lane], bottom[lane]
            if t > _INF or bt < _NEG_INF_KEY:
                scratch[0] = np.float32(np.nan)
            else:
                sbits[0] = t if t >= 0 else t ^ 0x7FFFFFFF
                sbits[1] = bt if bt >= 0 else bt ^ 0x7FFFFFFF
                scratch[0] = scratch[1] if -scratch[1] >= scratch[0] else scratch[0]
            peak = scratch[0]
            peaks[g0 + lane] = peak
            scratch[1] = peak * np.float32(-0.125)
            sbits[1] = np.int32(_bf16_round_bits(np.uint32(sbits[1])))
            step = scratch[1]
            if step == 0:
                steps[g0 + lane] = np.float32(0)
                step_l[lane] = np.float32(0)
                inv_l[lane] = np.float32(0)  # an all-zero group: q = 0, level 0, product +0.0 (a -0.0 is not bit-exact)
            else:
                steps[g0 + lane] = step
                step_l[lane] = step
                inv_l[lane] = np.float32(1) / step
        for j in range(group):
            for lane in range(_LANES):
                q = np.rint(tile[j, lane] * inv_l[lane])
                q = np.float32(-8) if q < np.float32(-8) else q
                q = np.float32(7) if q > np.float32(7) else q
                q = q + np.float32(0)
                ptile[j, lane] = q * step_l[lane]
                ltile[j, lane] = np.int8(q)
        for lane in range(_LANES):
            ok_l[lane] = True
        for j in range(group):
            for lane in range(_LANES):
                u = np.uint32(pbits[j, lane])
                hit = ((u + ((u >> 16) & 1) + 0x7FFF) & 0xFFFF0000) == np.uint32(tbits[j, lane])
                stile[j, lane] = hit
                ok_l[lane] &= hit
        for lane in range(m):
            base = (g0 + lane) * group
            for j in range(group):
                levels[base + j] = ltile[j, lane]
                same[base + j] = stile[j, lane]
            ok[g0 + lane] = ok_l[lane] or steps[g0 + lane] == 0


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
