"""The compiled kernels (numba) give what the numpy reference path gives: same levels, steps, flags and
counts, bit for bit (the float64 sum of |diff| only to rounding), same repacked files, same reports."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from gemmaserve.checkpoint import grid, grid_check, repack_checkpoint
from tests.checkpoint.builders import write_awq_build, write_grid_reference, write_requantized_build

pytest.importorskip("numba")


def _both(monkeypatch: pytest.MonkeyPatch, fn):  # type: ignore[no-untyped-def]
    monkeypatch.setenv(grid.KERNEL_ENV, "numpy")
    assert grid.kernel_name() == "numpy"
    slow = fn()
    monkeypatch.setenv(grid.KERNEL_ENV, "numba")
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

    def run() -> tuple[grid.GridComparison, grid.GridComparison]:
        floats, packs = grid.GridComparison(), grid.GridComparison()
        floats.add(build, reference, fit.steps, ref_group)
        packs.add_packed(packed, scales, build_group_size=build_group, scale_dtype="BF16",
                         reference=reference, reference_steps=fit.steps, group_size=ref_group)  # fmt: skip
        return floats, packs

    (slow_f, slow_p), (fast_f, fast_p) = _both(monkeypatch, run)
    for slow, fast in ((slow_f, fast_f), (slow_p, fast_p)):
        for field in (
            "values",
            "values_bit_identical",
            "groups",
            "groups_bit_identical",
            "values_off_by_a_level_or_more",
            "max_abs_diff",
        ):
            assert getattr(slow, field) == getattr(fast, field), field
        assert fast.sum_abs_diff == pytest.approx(slow.sum_abs_diff, rel=1e-12)
    assert slow_f.groups_bit_identical > 0 and 0 < slow_f.values_off_by_a_level_or_more < slow_f.values


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
