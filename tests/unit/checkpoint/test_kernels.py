"""The compiled kernels (numba) give what the numpy reference path gives: same levels, steps, flags and
counts, bit for bit (the float64 sum of |diff| only to rounding), same repacked files, same reports;
loaded either way: from the cached object through llvmlite (``native``) and through numba's dispatchers."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from gemmaserve.checkpoint import grid, grid_check, repack_checkpoint
from gemmaserve.checkpoint.gridcheck import GridCheckReport, GridScope
from gemmaserve.checkpoint.native import NativeKernels
from gemmaserve.errors import OffGrid
from tests.support.checkpoint.builders import write_awq_build, write_grid_reference, write_requantized_build

pytest.importorskip("numba")


@pytest.fixture(params=["numba", "numba-dispatch"], ids=["native", "dispatch"], autouse=True)
def compiled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs twice: with the kernels loaded from the cached object, and with numba's dispatchers."""
    monkeypatch.setenv(grid.KERNEL_ENV, request.param)
    assert isinstance(grid.kernels(), NativeKernels) == (request.param == "numba"), grid.native_failure
    return str(request.param)


# The comparison's counts the compiled and the numpy paths must agree on exactly (the sum of |diff| only closely).
EXACT_COUNTS = (*grid.GridComparison.COUNTS, "max_abs_diff")


def _both(monkeypatch: pytest.MonkeyPatch, fn):  # type: ignore[no-untyped-def]
    compiled = os.environ[grid.KERNEL_ENV]
    monkeypatch.setenv(grid.KERNEL_ENV, "numpy")
    assert grid.kernel_name() == "numpy"
    slow = fn()
    monkeypatch.setenv(grid.KERNEL_ENV, compiled)
    assert grid.kernel_name() == "numba"
    return slow, fn()


def _awkward_values(group: int, cols: int | None = None) -> np.ndarray:
    """Rows on the grid, an all-zero group, -0.0s, peaks off level -8, off-grid rows, inf and NaN."""
    rng = np.random.default_rng(group)
    cols = cols or 4 * group
    levels = rng.integers(-8, 8, size=(24, cols // group, group))
    levels[..., 0] = -8
    levels[:4] = rng.integers(-5, 6, size=(4, cols // group, group))  # peaks off level -8: the step search
    steps = grid.round_to_dtype(rng.uniform(0.001, 0.1, size=(24, cols // group)).astype(np.float32), "BF16")
    values = grid.reconstruct(levels.astype(np.float32), steps, "BF16").reshape(24, cols)
    values[4, :group] = 0.0
    values[5, :group] = 0.0
    values[5, 3] = -0.0
    values[6, 7] = -0.0
    values[7:10] = grid.round_to_dtype(rng.standard_normal((3, cols)).astype(np.float32) * 0.02, "BF16")
    values[10, 5] = grid.round_to_dtype(np.array([values[10, 5] * 1.01 + 0.001], np.float32), "BF16")[0]
    values[11, 0] = np.inf
    values[12, 1] = -np.inf
    values[13, 2] = np.nan
    values[14, :group] = grid.round_to_dtype(np.full(group, 1e-40, np.float32), "BF16")  # subnormal peak
    return values


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        both_nan = np.isnan(a) & np.isnan(b)
        return bool(((a.view(np.uint32) == b.view(np.uint32)) | both_nan).all())
    return bool((a == b).all())


@pytest.mark.parametrize("group", [32, 64, 128, 256])
def test_grid_recovery_matches_numpy(monkeypatch: pytest.MonkeyPatch, group: int) -> None:
    values = _awkward_values(group)
    slow, fast = _both(monkeypatch, lambda: grid.recover_grid(values, model_dtype="BF16", group_size=group))
    finite = np.isfinite(values).reshape(values.shape[0], -1, group).all(axis=-1)
    assert _same_bits(slow.steps, fast.steps)
    for field in ("on_grid", "peak_elsewhere", "bit_exact"):
        assert (getattr(slow, field) == getattr(fast, field)).all(), field
    levels_slow = slow.levels.reshape(*finite.shape, group)[finite]
    assert (levels_slow == fast.levels.reshape(*finite.shape, group)[finite]).all()
    assert slow.on_grid.sum() < slow.on_grid.size and slow.peak_elsewhere.any()  # the data exercise every path


@pytest.mark.parametrize(("ref_group", "build_group"), [(32, 32), (32, 128), (64, 32), (32, 256)])
def test_comparison_counts_match_numpy(monkeypatch: pytest.MonkeyPatch, ref_group: int, build_group: int) -> None:
    reference = _awkward_values(ref_group, 256)
    fit = grid.recover_grid(reference, model_dtype="BF16", group_size=ref_group)
    rng = np.random.default_rng(1)
    levels = rng.integers(-8, 8, size=(reference.shape[0], 256)).astype(np.int8)
    scales = grid.round_to_dtype(
        rng.uniform(0.001, 0.05, size=(reference.shape[0], 256 // build_group)).astype(np.float32), "BF16"
    )
    packed = grid._pack_int4_numpy(levels)
    build = grid.dequantize_pack_quantized(packed, scales, cols=256, group_size=build_group, model_dtype="BF16")
    build[3, 4] = reference[3, 4]  # some bit-identical values and groups
    build[:2] = reference[:2]
    build[15:24] = _ties_and_overshoots(reference[15:24], fit.steps[15:24], ref_group)

    def run() -> tuple[grid.GridComparison, grid.GridComparison]:
        floats, packs = grid.GridComparison(), grid.GridComparison()
        floats.add(build, reference, fit.steps, ref_group)
        packs.add_packed(grid.PackedWeights(packed, scales, build_group, "BF16"), reference, fit.steps, ref_group)
        return floats, packs

    (slow_f, slow_p), (fast_f, fast_p) = _both(monkeypatch, run)
    for slow, fast in ((slow_f, fast_f), (slow_p, fast_p)):
        for field in EXACT_COUNTS:
            assert getattr(slow, field) == getattr(fast, field), field
        assert fast.sum_abs_diff == pytest.approx(slow.sum_abs_diff, rel=1e-12)
    assert slow_f.groups_bit_identical > 0 and 0 < slow_f.values_off_by_a_level_or_more < slow_f.values
    assert slow_f.values_off_by_a_level_or_more != slow_f.values_nearest_level_differs > 0


def _ties_and_overshoots(reference: np.ndarray, steps: np.ndarray, group: int) -> np.ndarray:
    """Build rows at exactly half a reference step from a level (ties: the even level is the nearest) and up to
    two steps past either end of the grid (the end level is the nearest), on the rows' own signed steps."""
    rows, cols = reference.shape
    rng = np.random.default_rng(rows)
    halves = rng.integers(-20, 20, size=(rows, cols)).astype(np.float32) * np.float32(0.5)
    step = np.repeat(steps, group, axis=1)
    build = grid.round_to_dtype(halves * step, "BF16")
    assert (build == halves * step).any(), "exact ties, not ties rounded away"
    return build


def test_packing_and_decoding_match_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    levels = np.random.default_rng(2).integers(-8, 8, size=(16, 256)).astype(np.int8)
    bits = np.random.default_rng(3).integers(0, 1 << 16, size=(16, 256)).astype(np.uint16)
    (slow_pack, slow_decode), (fast_pack, fast_decode) = _both(
        monkeypatch, lambda: (grid.pack_int4(levels), grid.decode_values(bits, "BF16"))
    )
    assert slow_pack.tobytes() == fast_pack.tobytes()
    assert slow_decode.tobytes() == fast_decode.tobytes()


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.iterdir())
        if p.name != "gemmaserve-manifest.json"
    }


def test_repack_and_grid_check_reports_match_numpy(
    monkeypatch: pytest.MonkeyPatch, unquantized_dir: Path, tmp_path: Path
) -> None:
    outputs = iter([tmp_path / "numpy", tmp_path / "numba"])
    slow, fast = _both(monkeypatch, lambda: repack_checkpoint(unquantized_dir, next(outputs), int4_embeddings=True))
    assert slow.model_dump(exclude={"output", "manifest"}) == fast.model_dump(exclude={"output", "manifest"})
    assert _tree_digest(tmp_path / "numpy") == _tree_digest(tmp_path / "numba")

    truth = write_grid_reference(tmp_path / "ref", group_size=32)
    values = {m: v for m, (v, _) in truth.items()}
    for build in (
        write_requantized_build(values, tmp_path / "g128", group_size=128),
        write_requantized_build(values, tmp_path / "channel", group_size=None),
        write_awq_build(tmp_path / "ref", tmp_path / "awq", group_size=128),
    ):
        slow_report, fast_report = _both(monkeypatch, lambda b=build: grid_check(str(b), str(tmp_path / "ref")))
        mean = "mean_abs_diff"
        assert fast_report.model_dump(exclude={mean, "tensors"}) == slow_report.model_dump(exclude={mean, "tensors"})
        for s, f in zip(slow_report.tensors, fast_report.tensors, strict=True):
            assert s.model_dump(exclude={mean}) == f.model_dump(exclude={mean})
            assert f.mean_abs_diff == pytest.approx(s.mean_abs_diff, rel=1e-12)


def _awkward_bits(group: int, cols: int) -> np.ndarray:
    """``_awkward_values`` plus negative steps (positive peaks), ties between +peak and -peak, a group of
    subnormals and a group of NaN and inf only, as bf16 bits."""
    values = _awkward_values(group, cols)
    rng = np.random.default_rng(group + 7)
    levels = rng.integers(-8, 8, size=(4, cols // group, group))
    levels[..., 0] = -8
    steps = -grid.round_to_dtype(rng.uniform(0.001, 0.1, size=(4, cols // group)).astype(np.float32), "BF16")
    negative = grid.reconstruct(levels.astype(np.float32), steps, "BF16").reshape(4, cols)
    tie = negative[:1].copy()
    tie[0, 1:cols:group] = -tie[0, 0:cols:group]  # +peak and -peak in every group
    subnormal = np.zeros((1, cols), np.float32)
    subnormal[0, :group] = grid.bf16_bits_to_f32(np.arange(1, group + 1, dtype=np.uint16) | np.uint16(0x8000))
    specials = np.zeros((1, cols), np.float32)
    specials[0, :group] = np.nan
    specials[0, group : 2 * group] = np.inf
    specials[0, 2 * group : 3 * group] = -np.inf
    rows = np.concatenate([values, negative, tie, subnormal, specials])
    return grid.f32_to_bf16_bits(rows).reshape(rows.shape)


def test_one_pass_packing_matches_the_numpy_path(monkeypatch: pytest.MonkeyPatch, compiled: str) -> None:
    """pack_block_bf16 writes the packed words and scales the numpy path writes, group by group, and finds the
    same groups on the grid, off it, and with their peak elsewhere."""
    bits = _awkward_bits(32, 256)
    monkeypatch.setenv(grid.KERNEL_ENV, "numpy")
    fit = grid.recover_grid(grid.decode_values(bits, "BF16"), model_dtype="BF16")
    words = grid.pack_int4(fit.levels).view(np.uint8).reshape(-1, 16)
    scale_bits = grid.encode_values(fit.steps, "BF16").reshape(-1)
    monkeypatch.setenv(grid.KERNEL_ENV, compiled)
    packed, scales = np.empty(bits.size // 2, np.uint8), np.empty(bits.size // 32, np.uint16)
    block = grid.pack_block_bf16(grid.kernels(), bits, packed, scales)
    on_grid = fit.on_grid.reshape(-1)
    assert (block.off_grid == np.flatnonzero(~on_grid)).all() and 0 < len(block.off_grid) < on_grid.size
    assert block.groups == on_grid.size and block.peak_elsewhere == int(fit.peak_elsewhere.sum()) > 0
    assert (packed.reshape(-1, 16)[on_grid] == words[on_grid]).all()
    assert (scales[on_grid] == scale_bits[on_grid]).all()
    assert block.bit_exact == int(fit.bit_exact.reshape(-1, 32)[on_grid].sum())


@pytest.mark.parametrize(("ref_group", "build_group"), [(32, 32), (32, 128), (64, 32), (128, 256), (256, 64)])
def test_one_pass_comparison_matches_the_numpy_path(
    monkeypatch: pytest.MonkeyPatch, compiled: str, ref_group: int, build_group: int
) -> None:
    """compare_packed_block_bf16 counts what recover_grid + GridComparison.add_packed count on the numpy path."""
    bits = _awkward_bits(ref_group, 256)
    rows = bits.shape[0]
    rng = np.random.default_rng(ref_group + build_group)
    levels = rng.integers(-8, 8, size=(rows, 256)).astype(np.int8)
    scales = grid.round_to_dtype(rng.uniform(0.001, 0.05, size=(rows, 256 // build_group)).astype(np.float32), "BF16")
    scales[3, 0] = np.inf
    scales[4, 0] = np.nan
    scales[5, 0] = 0.0
    scales[6, 0] = -scales[6, 0]
    reference = grid.decode_values(bits, "BF16")
    copied = rng.random(rows) < 0.3  # builds that match the reference where it is on the grid
    monkeypatch.setenv(grid.KERNEL_ENV, "numpy")
    fit = grid.recover_grid(reference, model_dtype="BF16", group_size=ref_group)
    if build_group == 32:
        own = grid.recover_grid(reference, model_dtype="BF16", group_size=32)
        levels[copied] = own.levels[copied]
        scales[copied] = own.steps[copied]
    # Rows whose build values fall exactly halfway between two reference levels (a scale of half the reference
    # step: odd levels are ties), and rows reaching past the grid's ends (three times the step).
    first_step = np.repeat(fit.steps[:, :1], 256 // build_group, axis=1)
    scales[15:20] = first_step[15:20] * np.float32(0.5)
    scales[20:22] = grid.round_to_dtype(first_step[20:22] * np.float32(3), "BF16")
    scales[24] = first_step[24] * np.float32(0.5)  # a negative step
    packed = grid.pack_int4(levels)
    slow = grid.GridComparison()
    with np.errstate(all="ignore"):  # inf and NaN scales: the numpy path warns, the counts are what matter
        slow.add_packed(grid.PackedWeights(packed, scales, build_group, "BF16"), reference, fit.steps, ref_group)
    monkeypatch.setenv(grid.KERNEL_ENV, compiled)
    fast, on_grid, peak_elsewhere = grid.compare_packed_block_bf16(
        grid.kernels(), bits, ref_group, packed, grid.encode_values(scales, "BF16"), build_group
    )
    assert on_grid == int(fit.on_grid.sum()) < fit.on_grid.size
    assert peak_elsewhere == int(fit.peak_elsewhere.sum()) > 0
    for field in EXACT_COUNTS:
        assert getattr(fast, field) == getattr(slow, field), field
    assert fast.sum_abs_diff == pytest.approx(slow.sum_abs_diff, rel=1e-12)
    if build_group == 32:
        assert slow.groups_bit_identical > 0 and slow.values_bit_identical > 0
    assert 0 < slow.values_off_by_a_level_or_more < slow.values
    assert slow.values_off_by_a_level_or_more != slow.values_nearest_level_differs > 0


@pytest.mark.parametrize("reference_group_size", [16, 32, 64, 128, "channel"])
def test_grid_check_at_other_reference_group_sizes_matches_numpy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, reference_group_size: int | str
) -> None:
    """Given reference group sizes the one-pass kernel takes (32, 64) or leaves to the per-stage path (16), and
    ones the reference is not on (128, a row): the same report, bytes read included, or the same refusal."""
    truth = write_grid_reference(tmp_path / "ref", group_size=64)
    build = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "b", group_size=32)

    def run() -> GridCheckReport | str:
        try:
            return grid_check(str(build), str(tmp_path / "ref"), GridScope(reference_group_size=reference_group_size))
        except OffGrid as exc:
            return str(exc)

    slow, fast = _both(monkeypatch, run)
    if isinstance(slow, str) or isinstance(fast, str):
        assert slow == fast and reference_group_size in (128, "channel")
        return
    assert reference_group_size in (16, 32, 64)
    mean = "mean_abs_diff"
    assert fast.model_dump(exclude={mean, "tensors"}) == slow.model_dump(exclude={mean, "tensors"})
    for s, f in zip(slow.tensors, fast.tensors, strict=True):
        assert s.model_dump(exclude={mean}) == f.model_dump(exclude={mean})
        assert f.mean_abs_diff == pytest.approx(s.mean_abs_diff, rel=1e-12)
