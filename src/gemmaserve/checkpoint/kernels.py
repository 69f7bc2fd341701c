"""Compiled (numba) versions of the grid's hot loops, for bf16 checkpoints.

Optional: imported only by ``grid.kernels()`` (numba's dispatchers) or ``native_build.py`` when
numba is installed (``pip install "gemmaserve[numba]"``). Each kernel does, value by value, the same
float32 operations in the same order as the numpy code in ``grid.py`` (which stays the
reference implementation and the fallback), so levels, steps and counts are
identical; only the float64 sum of |diff| is added in another order. Kernels
release the GIL, so row blocks run on several threads. No I/O here.

``repack_bf16`` and ``check_packed_bf16`` are the one-pass paths (from the stored bits to the
packed build, or to the comparison's counts); the per-stage kernels above them serve the other
formats and group sizes. One module on purpose: numba's on-disk cache is keyed on this file
alone, so vector helpers kept elsewhere would leave stale compiled kernels after an edit.

The kernels the one-pass paths and their group-size detection call (``decode_bf16``, ``fit_bf16``,
``search_bf16``, ``repack_bf16``, ``check_packed_bf16``) are also built into a cached object that
later runs load without numba (``native.py``): they allocate nothing (scratch comes from the
caller), so the object needs nothing from numba's runtime. Keep it so: an allocation here makes
the build refuse the object, and every run falls back to numba's dispatchers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped, unused-ignore]
from numba import njit, types  # type: ignore[import-untyped, unused-ignore]
from numba.core import cgutils  # type: ignore[import-untyped, unused-ignore]
from numba.extending import intrinsic as _numba_intrinsic  # type: ignore[import-untyped, unused-ignore]

from gemmaserve.checkpoint.native_abi import COMPARISON_COUNTS

F = TypeVar("F", bound=Callable[..., Any])


def _jit(fn: F) -> F:
    # error_model="numpy": no zero-division checks (every division here has a nonzero divisor by construction),
    # so the compiled code has no exception paths that would reach for Python's error handling.
    return cast(F, njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")(fn))


def intrinsic(fn: Callable[..., Any]) -> Any:
    """numba's ``intrinsic``: the function's LLVM IR is generated inline where a kernel calls it."""
    return _numba_intrinsic(fn)


def _jit_sum(fn: F) -> F:
    """For the comparison only: lets the float64 sum of |diff| be vectorized (added in another order than numpy's)."""
    return cast(F, njit(nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"reassoc"})(fn))


_ABS = 0x7FFFFFFF
_INF = 0x7F800000
# Eight bool/int8 "equal" flags read as one 64-bit word. A numpy uint64, not a Python int: numba compares
# uint64 with int64 as float64, which loses the low bytes.
_ALL_EQUAL = np.uint64(0x0101010101010101)
_NEG_INF_KEY = -2139095041  # the order key of -inf's bits (see _key): a smaller key is a negative NaN
_COUNTS = len(COMPARISON_COUNTS)  # the comparison's float64 counts (native_abi.COMPARISON_COUNTS names them)


@_jit
def _bf16_round_bits(u: Any) -> Any:
    """float32 bits -> the bits of the nearest bf16 (ties to even; a NaN stays a quiet NaN), as float32 bits."""
    nan = (u & _ABS) > _INF
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    quiet = ((u >> 16) | 0x40) << 16
    return np.uint32(quiet if nan else rounded)


@_jit
def decode_bf16(bits: Any, out: Any) -> None:
    """uint16 bf16 bits -> float32 values, into ``out`` (both flat: numba's reshape calls its runtime).

    Outputs come from the caller, here and below: arrays allocated inside a kernel come
    from fresh pages on every call (a page fault per 4 KiB, as much system time as the work).
    """
    o = out.view(np.uint32)
    for i in range(bits.size):
        o[i] = np.uint32(bits[i]) << 16


_LANES = 64  # groups per tile in fit_bf16

# The one-pass kernels below take flat arrays and numbers on purpose: numba's nopython mode compiles them
# (and ``native_build.py`` exports them as C entry points, one pointer or integer per argument), so a grouping
# object would have to be a numba structref or jitclass, compiled on every first run and not passable through
# the C ABI. The Python side groups instead: ``grid.py`` builds the scratch buffers (``_fit_scratch``,
# ``_kernel_scratch``) and hands a block's arrays over in one call.


@_jit
def fit_bf16(
    values: Any, group: int, levels: Any, same: Any, steps: Any, ok: Any, peaks: Any, tiles: Any, ltile: Any,
    stile: Any, lanes: Any, ok_l: Any,
) -> None:  # fmt: skip
    """The peak-at-level--8 pass of ``grid._recover_block`` for a bf16 model and bf16 scales.

    ``values`` float32, flat. Writes levels int8 and same (bitwise) bool, one per value, and steps float32, ok bool
    and peaks float32 (for the step search), one per group (1-D arrays). Groups are taken ``_LANES`` at a time and
    transposed, so that each SIMD lane carries one group: max, min, level and compare
    run down the lanes with no per-group horizontal reduction (measured 20% faster than
    one group after another). The group's max and min are taken on order keys of the
    float bits (integer reductions vectorize; float ones do not without fast-math): they
    pick the same values as numpy's max and min, except which zero when the peak is
    zero, and such a group is all zeros, with step 0 either way.

    Scratch from the caller (nothing is allocated here: see ``native.py``): ``tiles`` float32 [2, group,
    _LANES], ``ltile`` int8 and ``stile`` bool [group, _LANES], ``lanes`` float32 [5, _LANES], ``ok_l`` bool
    [_LANES].
    """
    flat = values
    n = flat.size
    ng = n // group
    tile, ptile = tiles[0], tiles[1]
    tbits = tile.view(np.int32)
    pbits = ptile.view(np.int32)
    top = lanes[0].view(np.int32)
    bottom = lanes[1].view(np.int32)
    step_l = lanes[2]
    inv_l = lanes[3]
    scratch = lanes[4]
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
    max |diff| (as its bits), float64 sum of |diff| with NaN left out as numpy's nansum does,
    nearest level differs (``grid.count_nearest_level_differs``, in the same float64 operations)].

    Loops run the whole row, or exactly 32 values (per-group reductions over a variable
    count cost more than the work): each group's |step| is written out per value, the
    per-group "all identical" test reads eight equality flags as one 64-bit word.
    A zero step becomes the smallest float32 above zero, so that ``diff >= step`` reads
    ``diff > 0`` there, as in numpy's comparison.
    """
    cols = reference.size
    diff, eq, step_of, signed_of = scratch
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
        signed = np.float64(steps[g])
        for base in range(g * group, (g + 1) * group, 32):
            for lane in range(32):
                step_of[base + lane] = step
                signed_of[base + lane] = signed
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
    differs = 0
    for j in range(cols):
        s = signed_of[j]
        v, r = np.float64(value[j]), np.float64(reference[j])
        measured = abs(v) < np.inf and abs(r) < np.inf and abs(s) < np.inf  # NaN compares false
        safe = s if s != 0 else 1.0
        level_v = min(max(np.rint(v / safe), -8.0), 7.0)
        level_r = min(max(np.rint(r / safe), -8.0), 7.0)
        moved = (v != r) if s == 0 else (level_v != level_r)
        differs += 1 if measured and moved else 0
    out[0] += identical
    out[1] += groups_identical
    out[2] += off
    out[3] = max(out[3], max_bits)
    out[4] += total
    out[5] += differs


@_jit
def _row_scratch(cols: int) -> Any:
    return np.empty(cols, np.float32), np.empty(cols, np.int8), np.empty(cols, np.float32), np.empty(cols, np.float64)


@_jit
def compare(build: Any, reference: Any, steps: Any, group: int) -> Any:
    """``grid.GridComparison.add`` for float32 build values [rows, cols] (``group`` a multiple of 32):
    (bit-identical, groups bit-identical, off by a level, max |diff|, sum |diff|, nearest level differs)."""
    rows, cols = reference.shape
    scratch = _row_scratch(cols)
    out = np.zeros(_COUNTS, np.float64)
    for row in range(rows):
        _compare_row(build[row], reference[row], steps[row], group, scratch, out)
    return _totals(out)


@_jit
def _totals(out: Any) -> Any:
    max_diff = np.empty(1, np.int32)
    max_diff[0] = np.int32(out[3])
    return np.int64(out[0]), np.int64(out[1]), np.int64(out[2]), max_diff.view(np.float32)[0], out[4], np.int64(out[5])


@_jit
def compare_packed(packed: Any, scales: Any, build_group: int, reference: Any, steps: Any, group: int) -> Any:
    """``compare`` of a pack-quantized build with bf16 scales, dequantized row by row as bf16(q * scale).

    ``build_group`` must be a multiple of 8 (one int32 word never spans two scales).
    """
    rows, cols = reference.shape
    value = np.empty(cols, np.float32)
    vbits = value.view(np.uint32)
    scratch = _row_scratch(cols)
    out = np.zeros(_COUNTS, np.float64)
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


# --- fused passes on the bf16 bits (group of 32 values = one 512-bit vector) ----------------
#
# repack and grid-check read each reference value once: the peak, the step, the fit, the levels
# (packed straight into the output) and the comparison with the build, 32 values at a time in
# vector registers, with no float32 copy of the block and no per-value arrays. The 32-value
# operations are written as LLVM vector IR (numba's loop vectorizer unrolls fixed 32-long loops
# into scalar code, and widens 16-bit lanes to 64); they are the float32 operations of the numpy
# path, in its order, so every level, step and count is the same.

_I8, _I16, _I32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
_F32, _F64 = ir.FloatType(), ir.DoubleType()
_FULL = np.uint32(0xFFFFFFFF)  # 32 lanes all true, as a bit mask


def _vec(t: Any, n: int = 32) -> Any:
    return ir.VectorType(t, n)


def _const(t: Any, value: Any, n: int = 32) -> Any:
    return ir.Constant(ir.VectorType(t, n), [value] * n)


def _splat(builder: Any, value: Any) -> Any:
    vt = ir.VectorType(value.type, 32)
    one = builder.insert_element(ir.Constant(vt, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(_vec(_I32), [0] * 32))


def _call(builder: Any, name: str, ret: Any, args: list[Any], fastmath: tuple[str, ...] = ()) -> Any:
    declare: Any = cgutils.get_or_insert_function
    fn = declare(builder.module, ir.FunctionType(ret, [a.type for a in args]), name)
    return builder.call(fn, args, fastmath=fastmath)


def _address(context: Any, builder: Any, arrty: Any, arr: Any, index: Any, vt: Any) -> Any:
    """The address of ``arr[index]`` (a C-contiguous 1-D array), as a pointer to ``vt``."""
    data = context.make_array(arrty)(context, builder, value=arr).data
    return builder.bitcast(builder.gep(data, [index], inbounds=True), vt.as_pointer())


def _load_bf16(context: Any, builder: Any, arrty: Any, arr: Any, index: Any) -> tuple[Any, Any]:
    """32 bf16 values from ``arr[index:]`` (uint16): their float32 bits and their float32 values."""
    v16 = builder.load(_address(context, builder, arrty, arr, index, _vec(_I16)), align=2)
    bits = builder.shl(builder.zext(v16, _vec(_I32)), _const(_I32, 16))
    return bits, builder.bitcast(bits, _vec(_F32))


def _bf16_rounded(builder: Any, u: Any) -> Any:
    """float32 bits rounded to bf16 (ties to even), low half cleared, as ``grid._fit_peak_at_minus_8`` does (a NaN
    is not quieted there: the result only meets an equality test)."""
    r = builder.add(u, builder.and_(builder.lshr(u, _const(_I32, 16)), _const(_I32, 1)))
    return builder.and_(builder.add(r, _const(_I32, 0x7FFF)), _const(_I32, 0xFFFF0000))


def _levels(builder: Any, values: Any, inv: Any) -> Any:
    """rint(x * (1/step)) clipped to -8..7, -0.0 made +0.0 (a NaN stays NaN, as np.clip leaves it)."""
    q = _call(builder, "llvm.rint.v32f32", _vec(_F32), [builder.fmul(values, _splat(builder, inv))])
    q = builder.select(builder.fcmp_ordered("<", q, _const(_F32, -8.0)), _const(_F32, -8.0), q)
    q = builder.select(builder.fcmp_ordered(">", q, _const(_F32, 7.0)), _const(_F32, 7.0), q)
    return builder.fadd(q, _const(_F32, 0.0))


def _hits(builder: Any, bits: Any, q: Any, step: Any) -> Any:
    """Bit k set when value k is reconstructed bit for bit as bf16(q * step)."""
    product = builder.bitcast(builder.fmul(q, _splat(builder, step)), _vec(_I32))
    return builder.bitcast(builder.icmp_unsigned("==", _bf16_rounded(builder, product), bits), _I32)


@intrinsic
def _peak_key32(typingctx: Any, bits: Any, start: Any) -> Any:
    """max over bits[start:start+32] of rotl(b, 1) = |b| << 1 | sign: the key of the group's peak, the value of
    largest magnitude, the negative one on a tie (numpy's ``bottom if -bottom >= top else top``); any NaN
    gives a key above +-inf's."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        v = builder.load(_address(context, builder, sig.args[0], args[0], args[1], _vec(_I16)), align=2)
        key = builder.or_(builder.shl(v, _const(_I16, 1)), builder.lshr(v, _const(_I16, 15)))
        return _call(builder, "llvm.vector.reduce.umax.v32i16", _I16, [key])

    return types.uint16(bits, start), codegen


@intrinsic
def _fit32(typingctx: Any, bits: Any, start: Any, inv: Any, step: Any) -> Any:
    """The hit mask of 32 values at one step (``_hits``)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        x, values = _load_bf16(context, builder, sig.args[0], args[0], args[1])
        return _hits(builder, x, _levels(builder, values, args[2]), args[3])

    return types.uint32(bits, start, inv, step), codegen


@intrinsic
def _fit_pack32(typingctx: Any, bits: Any, start: Any, inv: Any, step: Any, out: Any, out_start: Any) -> Any:
    """``_fit32``, and the 32 levels as q+8 nibbles in out[out_start:out_start+16] (column 2i in the low nibble of
    byte i: ``grid.pack_int4``'s int32 words, little-endian)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        x, values = _load_bf16(context, builder, sig.args[0], args[0], args[1])
        q = _levels(builder, values, args[2])
        # A NaN level (an all-NaN group is "on the grid" with a NaN step) is 0, as numpy's astype(int8) gives on x86.
        number = builder.select(builder.fcmp_unordered("uno", q, q), _const(_F32, 0.0), q)
        nibbles = builder.fptosi(builder.fadd(number, _const(_F32, 8.0)), _vec(_I32))
        pairs = builder.bitcast(builder.trunc(builder.and_(nibbles, _const(_I32, 0xF)), _vec(_I8)), _vec(_I16, 16))
        low = builder.and_(pairs, _const(_I16, 0xF, 16))
        high = builder.and_(builder.lshr(pairs, _const(_I16, 4, 16)), _const(_I16, 0xF0, 16))
        packed = builder.trunc(builder.or_(low, high), _vec(_I8, 16))
        builder.store(packed, _address(context, builder, sig.args[4], args[4], args[5], _vec(_I8, 16)), align=1)
        return _hits(builder, x, q, args[3])

    return types.uint32(bits, start, inv, step, out, out_start), codegen


_tuple: Any = types.Tuple
_MASKS4 = _tuple((types.uint32, types.uint32, types.uint32, types.uint32))


@intrinsic
def _check32(
    typingctx: Any, bits: Any, start: Any, inv: Any, step: Any, packed: Any, scale: Any, magnitude: Any, sums: Any,
    tops: Any,
) -> Any:  # fmt: skip
    """32 reference values: fitted at ``step`` (``_fit32``) and compared with the build's, dequantized from
    packed[start/2:start/2+16] as bf16((q-8) * scale) (``_bf16_round_bits``, NaN quieted). Returns the masks
    (reconstructed, bit-identical, |diff| >= ``magnitude``, nearest level differs: ``_moved``); adds |diff| (a
    NaN as 0) to ``sums`` float64[8] and keeps the largest |diff| bits (a NaN as 0) in ``tops`` int32[32]:
    accumulated in vectors, reduced once by the caller (the float64 sum in another order than numpy's)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        bits_, start_, inv_, step_, packed_, scale_, magnitude_, sums_, tops_ = args
        r, ref = _load_bf16(context, builder, sig.args[0], bits_, start_)
        levels = _levels(builder, ref, inv_)
        hit = _hits(builder, r, levels, step_)
        byte_start = builder.lshr(start_, ir.Constant(start_.type, 1))
        b = builder.load(_address(context, builder, sig.args[4], packed_, byte_start, _vec(_I8, 16)), align=1)
        low, high = builder.and_(b, _const(_I8, 0xF, 16)), builder.lshr(b, _const(_I8, 4, 16))
        order = ir.Constant(_vec(_I32), [k // 2 + (16 if k % 2 else 0) for k in range(32)])
        q = builder.sub(builder.zext(builder.shuffle_vector(low, high, order), _vec(_I32)), _const(_I32, 8))
        u = builder.bitcast(builder.fmul(builder.sitofp(q, _vec(_F32)), _splat(builder, scale_)), _vec(_I32))
        nan = builder.icmp_unsigned(">", builder.and_(u, _const(_I32, _ABS)), _const(_I32, _INF))
        quiet = builder.or_(builder.and_(u, _const(_I32, 0xFFFF0000)), _const(_I32, 0x400000))
        v = builder.select(nan, quiet, _bf16_rounded(builder, u))
        same = builder.bitcast(builder.icmp_unsigned("==", v, r), _I32)
        diff = _call(builder, "llvm.fabs.v32f32", _vec(_F32), [builder.fsub(builder.bitcast(v, _vec(_F32)), ref)])
        off = builder.bitcast(builder.fcmp_ordered(">=", diff, _splat(builder, magnitude_)), _I32)
        dbits = builder.bitcast(diff, _vec(_I32))
        dbits = builder.select(builder.icmp_signed("<=", dbits, _const(_I32, _INF)), dbits, _const(_I32, 0))
        tops_at = _address(context, builder, sig.args[8], tops_, ir.Constant(ir.IntType(64), 0), _vec(_I32))
        old = builder.load(tops_at, align=4)
        builder.store(builder.select(builder.icmp_signed(">", dbits, old), dbits, old), tops_at, align=4)
        wide = builder.fpext(
            builder.select(builder.fcmp_ordered("ord", diff, diff), diff, _const(_F32, 0.0)), _vec(_F64)
        )
        quarters = [
            builder.shuffle_vector(wide, wide, ir.Constant(_vec(_I32, 8), list(range(8 * k, 8 * k + 8))))
            for k in range(4)
        ]
        flags = ("reassoc",)
        partial = builder.fadd(
            builder.fadd(quarters[0], quarters[1], flags=flags), builder.fadd(quarters[2], quarters[3], flags=flags),
            flags=flags,
        )  # fmt: skip
        sums_at = _address(context, builder, sig.args[7], sums_, ir.Constant(ir.IntType(64), 0), _vec(_F64, 8))
        builder.store(builder.fadd(builder.load(sums_at, align=8), partial, flags=flags), sums_at, align=8)
        moved = _moved(builder, builder.bitcast(v, _vec(_F32)), ref, levels, step_)
        return context.make_tuple(builder, sig.return_type, [hit, same, off, moved])

    return _MASKS4(bits, start, inv, step, packed, scale, magnitude, sums, tops), codegen


def _moved(builder: Any, build: Any, reference: Any, levels: Any, step: Any) -> Any:
    """Bit k set when build value k is not nearest ``levels[k]`` of the grid of ``step``: for reference values
    that reconstruct as bf16(q * step) (an on-grid group, where q is their nearest level), the count of
    ``grid.count_nearest_level_differs``, without a division. With d = build - q*step (exact for bf16 operands:
    12-bit products, and a rounded difference only far from the threshold), the build keeps level q when
    |d| < |step|/2, or |d| = |step|/2 and q is even (rint's tie), or it lies beyond q = -8 or q = 7 (clipped).
    A zero step's grid has one level: d is build - reference there, and any difference moves. Values whose
    build or step is NaN or infinite are not counted."""
    q = builder.select(builder.fcmp_unordered("uno", levels, levels), _const(_F32, 0.0), levels)
    zero_step = builder.fcmp_ordered("==", step, ir.Constant(_F32, 0.0))
    anchor = builder.select(zero_step, reference, builder.fmul(q, _splat(builder, step)))
    # u = d / sign(step): positive towards higher levels, so the grid's ends are one-sided bounds.
    sign = builder.and_(builder.bitcast(step, _I32), ir.Constant(_I32, 0x80000000))
    d = builder.bitcast(builder.fsub(build, anchor), _vec(_I32))
    u = builder.bitcast(builder.xor(d, _splat(builder, sign)), _vec(_F32))
    half = builder.fmul(_call(builder, "llvm.fabs.f32", _F32, [step]), ir.Constant(_F32, 0.5))
    low = builder.select(
        builder.fcmp_ordered("==", q, _const(_F32, -8.0)),
        _const(_F32, float("-inf")),
        _splat(builder, builder.fneg(half)),
    )
    high = builder.select(
        builder.fcmp_ordered("==", q, _const(_F32, 7.0)), _const(_F32, float("inf")), _splat(builder, half)
    )
    inside = builder.and_(builder.fcmp_ordered("<", low, u), builder.fcmp_ordered("<", u, high))
    even = builder.icmp_unsigned("==", builder.and_(builder.fptosi(q, _vec(_I32)), _const(_I32, 1)), _const(_I32, 0))
    distance = _call(builder, "llvm.fabs.v32f32", _vec(_F32), [u])
    kept = builder.or_(inside, builder.and_(builder.fcmp_ordered("==", distance, _splat(builder, half)), even))
    # The reference is finite wherever the step is (an on-grid group): only the build and the step to check.
    magnitude = _call(builder, "llvm.fabs.v32f32", _vec(_F32), [build])
    finite = builder.fcmp_ordered("<", magnitude, _const(_F32, float("inf")))
    step_finite = builder.fcmp_ordered(
        "<", _call(builder, "llvm.fabs.f32", _F32, [step]), ir.Constant(_F32, float("inf"))
    )
    finite = builder.and_(finite, _splat(builder, step_finite))
    return builder.bitcast(builder.and_(finite, builder.not_(kept)), _I32)


@intrinsic
def _popcount(typingctx: Any, mask: Any) -> Any:
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.zext(_call(builder, "llvm.ctpop.i32", _I32, [args[0]]), ir.IntType(64))

    return types.int64(mask), codegen


@_jit
def _steps_from_keys(keys: Any, n: int, peaks: Any, step: Any, inv: Any) -> None:
    """Peaks, steps bf16(peak * -1/8) and 1/step of ``n`` groups from their peak keys (a zero step: 0 and 0).

    Separate loops over the groups, so that each vectorizes across groups."""
    peak_bits = peaks.view(np.uint32)
    step_bits = step.view(np.uint32)
    for g in range(n):
        k = np.uint32(keys[g])
        bits = ((k >> np.uint32(1)) | ((k & np.uint32(1)) << np.uint32(15))) << np.uint32(16)
        peak_bits[g] = np.uint32(0x7FC00000) if k > np.uint32(0xFF01) else bits
    for g in range(n):
        step[g] = peaks[g] * np.float32(-0.125)
    for g in range(n):
        step_bits[g] = _bf16_round_bits(step_bits[g])
    for g in range(n):
        s = step[g]
        zero = s == np.float32(0)
        step[g] = np.float32(0) if zero else s
        inv[g] = np.float32(0) if zero else np.float32(1) / s


_CHUNK_GROUPS = 512  # groups per pass of _steps_from_keys (its arrays stay in L1)


@_jit
def repack_bf16(bits: Any, packed: Any, scales: Any, ok: Any, peaks: Any, scratch: Any, keys: Any) -> int:
    """One pass of ``recover_grid`` + ``pack_int4`` + ``encode_values`` for groups of 32 bf16 values.

    ``bits`` uint16 (all values, flat); writes ``packed`` uint8 (the int32 words' bytes, n/2), ``scales``
    uint16 (the steps' bf16 bits) and, per group, ``ok`` (on the grid with its peak at level -8, or all zero)
    and ``peaks`` float32 (for the step search of the others, whose packed bytes and scales the caller
    rewrites). Scratch: ``scratch`` float32 [3, _CHUNK_GROUPS], ``keys`` uint16 [_CHUNK_GROUPS]. Returns the
    values reconstructed bit for bit in ok groups.
    """
    ng = bits.size // 32
    step, inv = scratch[0], scratch[1]
    step_bits = step.view(np.uint32)
    hits = 0
    for g0 in range(0, ng, _CHUNK_GROUPS):
        m = min(_CHUNK_GROUPS, ng - g0)
        for g in range(m):
            keys[g] = _peak_key32(bits, (g0 + g) * 32)
        _steps_from_keys(keys, m, peaks[g0 : g0 + m], step, inv)
        for g in range(m):
            mask = _fit_pack32(bits, (g0 + g) * 32, inv[g], step[g], packed, (g0 + g) * 16)
            good = (mask == _FULL) | (step[g] == np.float32(0))
            ok[g0 + g] = good
            hits += _popcount(mask) if good else 0
            scales[g0 + g] = np.uint16(step_bits[g] >> np.uint32(16))
    return hits


@_jit_sum
def check_packed_bf16(
    bits: Any, group: int, packed: Any, scales: Any, build_group: int, steps: Any, ok: Any, peaks: Any,
    scratch: Any, keys: Any, sums: Any, tops: Any, out: Any,
) -> None:  # fmt: skip
    """Grid-check of a pack-quantized build (bf16 scales) against bf16 reference values, in one pass.

    ``bits`` uint16 (flat), reference groups of ``group`` values; ``packed`` uint8 (the build's int32 words'
    bytes), ``scales`` uint16 (bf16 bits) per ``build_group`` values; both sizes multiples of 32 dividing the
    row. Writes per reference group ``steps`` (peak/-8), ``ok`` and ``peaks`` as ``repack_bf16``; adds to
    ``out`` float64 [bit-identical, groups bit-identical, off by a level in ok groups (the caller counts the
    others with their searched step), max |diff| bits, sum |diff|, nearest level differs in ok groups (the
    same)] (``native_abi.COMPARISON_COUNTS``). Scratch: ``scratch`` float32 [3,
    _CHUNK_GROUPS], ``keys`` uint16 [_CHUNK_GROUPS], ``sums`` float64 [8], ``tops`` int32 [32].
    """
    chunks, build_chunks = group // 32, build_group // 32
    ng = bits.size // group
    step, inv, scale = scratch[0], scratch[1], scratch[2]
    scale_bits = scale.view(np.uint32)
    for lane in range(8):
        sums[lane] = 0.0
    for lane in range(32):
        tops[lane] = 0
    tiny = np.float32(1e-45)
    identical = groups_identical = off = differs = 0
    scale_index, scale_left = 0, build_chunks
    scale_bits[0] = np.uint32(scales[0]) << np.uint32(16)
    for g0 in range(0, ng, _CHUNK_GROUPS):
        m = min(_CHUNK_GROUPS, ng - g0)
        for g in range(m):
            base = (g0 + g) * group
            k = _peak_key32(bits, base)
            for c in range(1, chunks):
                k = max(k, _peak_key32(bits, base + 32 * c))
            keys[g] = k
        _steps_from_keys(keys, m, peaks[g0 : g0 + m], step, inv)
        for g in range(m):
            s, i = step[g], inv[g]
            steps[g0 + g] = s
            magnitude = abs(s)
            magnitude = magnitude if magnitude > np.float32(0) else tiny  # a zero step: any |diff| > 0 is off
            all_hit = True
            all_same = True
            group_off = group_differs = 0
            for c in range(chunks):
                if scale_left == 0:  # the next build group (a counter: no division per chunk)
                    scale_index += 1
                    scale_left = build_chunks
                    scale_bits[0] = np.uint32(scales[scale_index]) << np.uint32(16)
                scale_left -= 1
                hit, same, n_off, moved = _check32(
                    bits, (g0 + g) * group + 32 * c, i, s, packed, scale[0], magnitude, sums, tops
                )
                all_hit &= hit == _FULL
                identical += _popcount(same)
                all_same &= same == _FULL
                group_off += _popcount(n_off)
                group_differs += _popcount(moved)
            good = all_hit or s == np.float32(0)
            ok[g0 + g] = good
            off += group_off if good else 0
            differs += group_differs if good else 0
            groups_identical += all_same
    out[0] += identical
    out[1] += groups_identical
    out[2] += off
    top = np.int32(0)
    for lane in range(32):  # not tops.max(): its empty-array check is an exception path
        top = max(top, tops[lane])
    out[3] = max(out[3], top)
    out[4] += sums.sum()
    out[5] += differs


# --- the step search (groups whose peak is not at level -8) ---------------------------------

_PEAK_LEVELS = np.array((7, -7, 6, -6, 5, -5, 4, -4, 3, -3, 2, -2, 1, -1), np.float64)  # grid._PEAK_LEVELS


@intrinsic
def _f32_bits(typingctx: Any, value: Any) -> Any:
    """The bits of a float32, as a uint32 (a bit cast: no array to view, no allocation)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], _I32)

    return types.uint32(types.float32), codegen


@intrinsic
def _f32_of_bits(typingctx: Any, bits: Any) -> Any:
    """The float32 whose bits are the uint32 ``bits``."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], _F32)

    return types.float32(types.uint32), codegen


@_jit
def _bf16_value(bits: Any) -> Any:
    """bf16 bits (an int 0..0xFFFF) as a float32 value."""
    return _f32_of_bits(np.uint32(bits) << np.uint32(16))


@_jit
def _bf16_bits_of(value: Any) -> int:
    """``grid.f32_to_bf16_bits`` of one float32 value (NaN quieted)."""
    return int(_bf16_round_bits(_f32_bits(np.float32(value))) >> np.uint32(16))


@_jit
def _fits(x: Any, step: Any, levels: Any, same: Any, write: bool) -> bool:
    """``grid._fit`` of one group at one bf16 step: whether every value reconstructs as a number; with
    ``write``, its levels and bit-for-bit flags. Stops at the first value that does not (unless writing)."""
    safe = np.float32(1) if step == np.float32(0) else step
    ok = True
    for j in range(x.size):
        q = np.rint(x[j] / safe)
        q = np.float32(0) if step == np.float32(0) else q
        finite = np.isfinite(q)
        q = q if finite else np.float32(0)
        clipped = min(max(q, np.float32(-8)), np.float32(7)) + np.float32(0)
        recon_bits = _bf16_round_bits(_f32_bits(np.float32(clipped * step)))
        good = (q == clipped) and finite and (_f32_of_bits(recon_bits) == x[j])
        if write:
            levels[j] = np.int8(clipped)
            same[j] = recon_bits == _f32_bits(x[j])
        elif not good:
            return False
        ok &= good
    return ok


@_jit
def search_bf16(
    values: Any, peaks: Any, steps: Any, levels: Any, found: Any, same: Any, trial_levels: Any, trial_same: Any
) -> None:
    """``grid._search_steps`` for bf16 values and steps, group by group: values float32 [k, group], peaks
    float32 [k]; for a group on a grid, writes its step, levels, bit-for-bit flags and found=True (the others
    are left as they are). Candidates in the same order (peak/m for m in _PEAK_LEVELS, then one bf16 ulp
    below and above); the first that reconstructs every value as a number is kept until one reconstructs
    them bit for bit. Scratch: ``trial_levels`` int8 and ``trial_same`` bool [group]."""
    group = values.shape[1]
    for i in range(values.shape[0]):
        x = values[i]
        numeric = False
        for m in _PEAK_LEVELS:
            base = _bf16_bits_of(np.float32(np.float64(peaks[i]) / m))
            exact = False
            for d in (0, -1, 1):
                step = _bf16_value(min(max(base + d, 0), 0xFFFF))
                if not _fits(x, step, trial_levels, trial_same, False):
                    continue
                _fits(x, step, trial_levels, trial_same, True)
                exact = True
                for j in range(group):
                    exact &= trial_same[j]
                if exact or not numeric:
                    steps[i] = step
                    for j in range(group):  # element by element: an array assignment may copy (allocate)
                        levels[i, j] = trial_levels[j]
                        same[i, j] = trial_same[j]
                    numeric = True
                if exact:
                    break
            if exact:
                break
        found[i] = numeric
