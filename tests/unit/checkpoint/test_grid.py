from __future__ import annotations

import numpy as np
import pytest
import torch
from compressed_tensors.compressors.pack_quantized.base import (
    PackedQuantizationCompressor,
)
from compressed_tensors.compressors.pack_quantized.helpers import (
    pack_to_int32,
    unpack_from_int32,
)
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

from gemmaserve.checkpoint import grid
from tests.support.checkpoint.builders import qat_values, to_bf16


def _scheme() -> QuantizationScheme:
    args = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=32)
    return QuantizationScheme(targets=["Linear"], weights=args)


def test_peak_at_minus_8_recovers_exact_levels_and_steps() -> None:
    rng = np.random.default_rng(1)
    values = qat_values(16, 128, rng)
    fit = grid.recover_grid(values, model_dtype="BF16")
    assert fit.on_grid.all() and fit.bit_exact.all() and not fit.peak_elsewhere.any()
    assert (
        grid.reconstruct(fit.levels.reshape(16, 4, 32).astype(np.float32), fit.steps, "BF16").reshape(16, 128) == values
    ).all()


def test_peak_not_at_8_needs_the_search_and_textbook_max_over_8_fails() -> None:
    rng = np.random.default_rng(2)
    values = qat_values(16, 128, rng, peak_elsewhere=True)  # levels in -5..5
    fit = grid.recover_grid(values, model_dtype="BF16")
    assert fit.on_grid.all() and fit.bit_exact.all()
    assert fit.peak_elsewhere.all()
    groups = values.reshape(16, 4, 32)
    textbook = grid.round_to_dtype(np.abs(groups).max(axis=-1) / 8, "BF16")
    recon = grid.reconstruct(np.clip(np.rint(groups / textbook[..., None]), -8, 7), textbook, "BF16")
    assert not (recon == groups).all(axis=-1).any()


def test_bf16_rounding_of_products_still_reconstructs_bit_exactly() -> None:
    rng = np.random.default_rng(3)
    values = qat_values(32, 256, rng)
    groups = values.reshape(32, 8, 32)
    fit = grid.recover_grid(values, model_dtype="BF16")
    exact_products = fit.levels.reshape(32, 8, 32).astype(np.float64) * fit.steps[..., None].astype(np.float64)
    assert (exact_products != groups).any(), "the test must contain products that bf16 rounds"
    assert fit.bit_exact.all()


def test_all_zero_groups_and_negative_zero() -> None:
    values = np.zeros((2, 64), np.float32)
    values[1, 32:] = qat_values(1, 32, np.random.default_rng(4))
    fit = grid.recover_grid(values, model_dtype="BF16")
    assert fit.on_grid.all() and fit.bit_exact.all() and fit.steps[0, 0] == 0
    values[0, 3] = -0.0
    fit = grid.recover_grid(values, model_dtype="BF16")
    assert fit.on_grid.all() and not fit.bit_exact[0, 3]


def test_off_grid_values_are_found() -> None:
    values = grid.round_to_dtype(np.random.default_rng(5).standard_normal((8, 64)).astype(np.float32), "BF16")
    fit = grid.recover_grid(values, model_dtype="BF16")
    assert not fit.on_grid.any()


def test_packing_matches_compressed_tensors_byte_for_byte() -> None:
    levels = np.random.default_rng(6).integers(-8, 8, size=(8, 256)).astype(np.int8)
    ours = grid.pack_int4(levels)
    theirs = pack_to_int32(torch.from_numpy(levels), 4).numpy()
    assert ours.tobytes() == theirs.tobytes()
    assert (
        grid.unpack_int4(ours, 256) == unpack_from_int32(torch.from_numpy(ours), 4, torch.Size([8, 256])).numpy()
    ).all()


def test_compressed_tensors_compress_and_decompress_agree_with_our_grid() -> None:
    values = qat_values(8, 128, np.random.default_rng(7))
    fit = grid.recover_grid(values, model_dtype="BF16")
    scale = to_bf16(fit.steps)
    state = PackedQuantizationCompressor.compress({"weight": to_bf16(values), "weight_scale": scale}, _scheme())
    assert state["weight_packed"].numpy().tobytes() == grid.pack_int4(fit.levels).tobytes()
    back = PackedQuantizationCompressor.decompress(dict(state), _scheme())["weight"]
    ours = grid.dequantize_pack_quantized(
        grid.pack_int4(fit.levels), fit.steps, cols=128, group_size=32, model_dtype="BF16"
    )
    assert back.view(torch.int16).numpy().tobytes() == grid.f32_to_bf16_bits(ours).tobytes()
    assert (ours == values).all()


def test_awq_pack_order_and_dequantization() -> None:
    rng = np.random.default_rng(8)
    nibbles = rng.integers(0, 16, size=(64, 32)).astype(np.uint8)
    packed = grid.pack_awq(nibbles)
    assert (grid.unpack_awq(packed) == nibbles).all()
    # Word 0 nibble 1 holds column 2 (AutoAWQ's interleaved order).
    assert (((packed[:, 0].view(np.uint32) >> 4) & 0xF) == nibbles[:, 2]).all()
    zeros = grid.pack_awq(np.full((2, 32), 8, np.uint8))
    scales = np.full((2, 32), 0.5, np.float32)
    values = grid.dequantize_awq(packed, zeros, scales, group_size=32)
    assert values.shape == (32, 64)
    assert (values == (nibbles.astype(np.float32).T - 8) * 0.5).all()


def test_float16_model_dtype_roundtrip() -> None:
    rng = np.random.default_rng(9)
    steps = rng.uniform(0.01, 0.05, size=(4, 2)).astype(np.float16).astype(np.float32)
    levels = rng.integers(-8, 8, size=(4, 2, 32)).astype(np.float32)
    levels[..., 5] = -8
    values = grid.reconstruct(levels, steps, "F16").reshape(4, 64)
    fit = grid.recover_grid(values, model_dtype="F16")
    assert fit.on_grid.all() and fit.bit_exact.all()


@pytest.mark.parametrize("value", [1.0, -3.5, 1e-30, 65504.0])
def test_bf16_rounding_matches_torch(value: float) -> None:
    x = np.array([value, value * 1.00390625, value * 1.0029], np.float32)
    ours = grid.f32_to_bf16_bits(x)
    theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert (ours == theirs).all()


@pytest.mark.parametrize("kernel", ["numpy", "numba-dispatch", "numba"])
def test_the_two_measures_by_hand(monkeypatch: pytest.MonkeyPatch, kernel: str) -> None:
    """'Off by a level' is |build - reference| >= |step|; 'nearest level differs' is the build's nearest level of
    the reference group's grid (clipped to -8..7, the even one on a tie) against the reference's own. Values past
    the grid's end keep the end level; a zero step's grid has one level; NaN and inf are counted by neither."""
    if kernel != "numpy":
        pytest.importorskip("numba")
    monkeypatch.setenv(grid.KERNEL_ENV, kernel)
    levels = np.tile(np.arange(-8, 8, dtype=np.float32), 2)
    build_levels = levels.copy()  # in units of the step: which level the build value sits at, or between
    build_levels[:8] = [-8.5, -7.5, -6.5, -5.4, -3.4, 9.0, 6.5, 6.5]
    levels[5:8] = [7, 6, 7]  # the reference's levels there
    expected_differs = [1, 4, 7]  # -7.5 rounds to -8 (even), -3.4 is nearest -3, 6.5 rounds to 6
    expected_off = [5]  # 9 is two steps past 7 (nearest level still 7)
    reference, build, steps = [], [], []
    for step in (0.0625, -0.0625):  # the same pattern on a negative step (a positive peak at level -8)
        reference.append(levels * np.float32(step))
        row = build_levels * np.float32(step)
        row[8], row[9] = np.nan, np.inf
        build.append(row)
        steps.append(step)
    zero_group = np.zeros(32, np.float32)
    build.append(zero_group.copy())
    build[-1][1], build[-1][2] = -0.0, 1e-3  # -0.0 is the level 0; 1e-3 is off the one level there is
    reference.append(zero_group)
    steps.append(0.0)
    comparison = grid.GridComparison()
    comparison.add(np.array(build), np.array(reference), np.array(steps, np.float32)[:, None], 32)
    assert comparison.values_nearest_level_differs == 2 * len(expected_differs) + 1
    assert comparison.values_off_by_a_level_or_more == 2 * len(expected_off) + 1 + 2  # + 2: inf is off
    assert comparison.values_not_finite == 4
