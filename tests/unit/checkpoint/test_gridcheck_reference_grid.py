"""grid-check measures on the REFERENCE's grid, whatever the build's group size.

Each build is re-quantized from the same group-32 reference by compressed-tensors' own
compressor (groups of 32, 64, 128, per channel) or in AutoAWQ's GEMM layout (groups of
128); the expected share off by a level is computed here independently: the build is
dequantized by compressed-tensors (or by a numpy AutoAWQ unpacker written below) and
compared with the reference's true steps, kept from when the reference was generated.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.numpy import load_file as load_numpy

from gemmaserve.checkpoint import grid_check
from gemmaserve.checkpoint.gridcheck import GridScope
from gemmaserve.cli import app, main
from gemmaserve.errors import OffGrid, UsageError
from tests.support.checkpoint.builders import (
    GRID_MODULES,
    ct_scheme,
    to_bf16,
    write_awq_build,
    write_grid_reference,
    write_requantized_build,
    write_weight_reference,
)

Truth = dict[str, tuple[np.ndarray, np.ndarray]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    root = tmp_path_factory.mktemp("ref") / "tiny-qat-q4_0-unquantized"
    return root, write_grid_reference(root, group_size=32)


def _decompress_ct(build: Path, group_size: int | None) -> dict[str, np.ndarray]:
    """The build's values as compressed-tensors itself dequantizes them."""
    from compressed_tensors.compressors.pack_quantized.base import (
        PackedQuantizationCompressor,
    )
    from safetensors.torch import load_file

    state = load_file(str(build / "model.safetensors"))
    out = {}
    for module in GRID_MODULES:
        local = {k.rsplit(".", 1)[1]: v for k, v in state.items() if k.rsplit(".", 1)[0] == module}
        weight = PackedQuantizationCompressor.decompress(local, ct_scheme(group_size))["weight"]  # type: ignore[arg-type]
        out[module] = weight.to(torch.bfloat16).float().numpy()
    return out


def _decompress_awq(build: Path) -> dict[str, np.ndarray]:
    """AutoAWQ GEMM dequantization in numpy: word j nibble i holds output column 8j + (0,2,4,6,1,3,5,7)[i]."""
    state = load_numpy(str(build / "model.safetensors"))
    order = [0, 2, 4, 6, 1, 3, 5, 7]

    def unpack(words: np.ndarray) -> np.ndarray:
        k, n8 = words.shape
        out = np.empty((k, n8 * 8), np.float16)
        w = words.view(np.uint32)
        for nibble, column in enumerate(order):
            out[:, column::8] = ((w >> np.uint32(4 * nibble)) & np.uint32(0xF)).astype(np.float16)
        return out

    values = {}
    for module in GRID_MODULES:
        q, z, s = unpack(state[f"{module}.qweight"]), unpack(state[f"{module}.qzeros"]), state[f"{module}.scales"]
        group = q.shape[0] // s.shape[0]
        values[module] = ((q - np.repeat(z, group, axis=0)) * np.repeat(s, group, axis=0)).astype(np.float32).T
    return values


def nearest_levels(values: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Each value's nearest level of its group's grid, by trying all 16: the q in -8..7 that minimises
    |value - q * step| (float64: exact for these operands), the even q when two are equally near."""
    q = np.arange(-8, 8, dtype=np.float64)
    distance = np.abs(values.astype(np.float64)[..., None] - q * steps.astype(np.float64)[..., None])
    nearest = distance == distance.min(axis=-1, keepdims=True)
    preference = np.where(nearest, np.where(q % 2 == 0, 0, 1), 2)
    return q[np.argmin(preference, axis=-1)]


def _expected_differs(build_values: dict[str, np.ndarray], truth: Truth) -> int:
    """Values whose nearest level of the reference group's grid is not the reference value's own."""
    differs = 0
    for module, (ref, steps) in truth.items():
        step = np.repeat(steps, ref.shape[1] // steps.shape[1], axis=1)
        assert (step != 0).all()  # a zero step's grid is one level: not what this counts
        differs += int(np.count_nonzero(nearest_levels(build_values[module], step) != nearest_levels(ref, step)))
    return differs


def _expected_off(build_values: dict[str, np.ndarray], truth: Truth) -> tuple[int, int]:
    """Values whose distance from the reference is at least one step of the reference's own group."""
    off = total = 0
    for module, (ref, steps) in truth.items():
        cols = ref.shape[1]
        step = np.repeat(np.abs(steps), cols // steps.shape[1], axis=1)
        off += int(np.count_nonzero(np.abs(build_values[module] - ref) >= step))
        total += ref.size
    return off, total


@pytest.mark.parametrize("group_size", [32, 64, 128, None], ids=["g32", "g64", "g128", "per-channel"])
def test_requantized_builds_are_measured_on_the_reference_grid(
    reference: tuple[Path, Truth], tmp_path: Path, group_size: int | None
) -> None:
    ref_dir, truth = reference
    build = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "build", group_size=group_size)
    dequantized = _decompress_ct(build, group_size)
    expected_off, total = _expected_off(dequantized, truth)
    report = grid_check(str(build), str(ref_dir))
    assert report.values == total
    assert report.values_off_by_a_level_or_more == expected_off
    assert report.values_nearest_level_differs == _expected_differs(dequantized, truth)
    assert report.share_nearest_level_differs == pytest.approx(report.values_nearest_level_differs / total)
    assert report.share_off_by_a_level_or_more == pytest.approx(expected_off / total)
    if group_size == 32:  # the observer's absmax/7.5 stretches each step by 8/7.5: values move, by less than a level
        assert expected_off == 0 and report.verdict == "on-grid-rounding"
    else:
        assert expected_off > 0.05 * total, "a coarser re-quantization moves values by whole reference levels"
        assert report.verdict == "off-grid"
    assert report.reference_group_size == 32 and report.reference_group_size_source == "detected"
    assert {t.build_group_size for t in report.tensors} == (
        {group_size} if group_size else {cols for _, cols in GRID_MODULES.values()}
    )
    assert all(t.reference_groups_on_grid == t.groups for t in report.tensors)


def test_a_group_32_build_with_the_reference_steps_is_lossless(reference: tuple[Path, Truth], tmp_path: Path) -> None:
    ref_dir, truth = reference
    build = write_requantized_build(
        {m: v for m, (v, _) in truth.items()},
        tmp_path / "build",
        group_size=32,
        steps={m: s for m, (_, s) in truth.items()},
    )
    report = grid_check(str(build), str(ref_dir))
    assert report.values_off_by_a_level_or_more == 0 and report.verdict == "bit-identical"
    assert report.reference_group_size == 32


def test_an_autoawq_gemm_group_128_build(reference: tuple[Path, Truth], tmp_path: Path) -> None:
    ref_dir, truth = reference
    build = write_awq_build(ref_dir, tmp_path / "awq", group_size=128)
    expected_off, total = _expected_off(_decompress_awq(build), truth)
    report = grid_check(str(build), str(ref_dir))
    assert report.values_nearest_level_differs == _expected_differs(_decompress_awq(build), truth)
    assert {t.build_format for t in report.tensors} == {"awq-gemm"}
    assert {t.build_group_size for t in report.tensors} == {128}
    assert report.reference_group_size == 32
    assert report.values == total and report.values_off_by_a_level_or_more == expected_off > 0.05 * total
    assert report.verdict == "off-grid"


def test_the_reference_group_size_is_detected_not_assumed(tmp_path: Path) -> None:
    truth = write_grid_reference(tmp_path / "ref128", group_size=128)
    lossless = write_requantized_build(
        {m: v for m, (v, _) in truth.items()},
        tmp_path / "b128",
        group_size=128,
        steps={m: s for m, (_, s) in truth.items()},
    )
    report = grid_check(str(lossless), str(tmp_path / "ref128"))
    assert report.reference_group_size == 128 and report.verdict == "bit-identical"
    coarser = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "pc", group_size=None)
    expected_off, _ = _expected_off(_decompress_ct(coarser, None), truth)
    assert grid_check(str(coarser), str(tmp_path / "ref128")).values_off_by_a_level_or_more == expected_off


def test_a_given_reference_group_size_is_used_and_checked(reference: tuple[Path, Truth], tmp_path: Path) -> None:
    ref_dir, truth = reference
    build = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "b", group_size=128)
    given = grid_check(str(build), str(ref_dir), GridScope(reference_group_size=32))
    assert given.reference_group_size_source == "given" and given.reference_group_size == 32
    assert given.values_off_by_a_level_or_more == grid_check(str(build), str(ref_dir)).values_off_by_a_level_or_more
    with pytest.raises(OffGrid, match="not on a 4-bit grid"):
        grid_check(str(build), str(ref_dir), GridScope(reference_group_size=128))  # the reference's groups are 32
    with pytest.raises(UsageError, match="reference-group-size"):
        grid_check(str(build), str(ref_dir), GridScope(reference_group_size=48))


def _random_reference(root: Path) -> Path:
    from safetensors.torch import save_file

    from tests.support.checkpoint.builders import config

    rng = np.random.default_rng(3)
    root.mkdir(parents=True)
    tensors = {
        f"{m}.weight": to_bf16(rng.standard_normal(shape).astype(np.float32) * 0.02)
        for m, shape in GRID_MODULES.items()
    }
    save_file(tensors, str(root / "model.safetensors"))
    (root / "config.json").write_text(json.dumps(config()))
    return root


def test_a_reference_off_any_4_bit_grid_is_refused(
    reference: tuple[Path, Truth], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, truth = reference
    build = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "b", group_size=128)
    plain = _random_reference(tmp_path / "plain-bf16")
    with pytest.raises(OffGrid, match="not on a 4-bit grid"):
        grid_check(str(build), str(plain))
    with pytest.raises(SystemExit) as exit_:
        main(["checkpoint", "grid-check", str(build), "--reference", str(plain)])
    assert exit_.value.code == 1
    out, err = capsys.readouterr()
    assert "not on a 4-bit grid" in err and out == "" and "verdict:" not in err


def test_the_cli_takes_and_reports_the_reference_group_size(
    reference: tuple[Path, Truth], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref_dir, truth = reference
    build = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "b", group_size=64)
    result = CliRunner().invoke(
        app,
        ["checkpoint", "grid-check", str(build), "--reference", str(ref_dir), "--reference-group-size", "32", "--json"],
    )
    assert result.exit_code == 1, result.output  # values are off by a level
    report = json.loads(result.stdout)
    assert report["reference_group_size"] == 32 and report["verdict"] == "off-grid"
    # The request model refuses it, through the entry point that maps a usage error to exit 2.
    with pytest.raises(SystemExit) as bad:
        main(["checkpoint", "grid-check", str(build), "--reference", str(ref_dir), "--reference-group-size", "0"])
    assert bad.value.code == 2
    assert "--reference-group-size" in capsys.readouterr().err


def test_a_group_128_build_of_a_group_32_qat_export_reports_both_measures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Random weights quantized to the group-32 grid (the reference), re-quantized by compressed-tensors with groups
    of 128 (the build): values move by less than a step more often than by a whole one, so the share whose nearest
    reference level differs is well above the share off by a level; each is what the brute force above counts."""
    truth = write_weight_reference(tmp_path / "ref", seed=5)
    build = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "g128", group_size=128)
    dequantized = _decompress_ct(build, 128)
    expected_off, total = _expected_off(dequantized, truth)
    expected_differs = _expected_differs(dequantized, truth)
    report = grid_check(str(build), str(tmp_path / "ref"))
    assert (report.values, report.values_off_by_a_level_or_more) == (total, expected_off)
    assert report.values_nearest_level_differs == expected_differs
    assert 0.02 < report.share_off_by_a_level_or_more < report.share_nearest_level_differs - 0.05
    assert sum(t.values_nearest_level_differs for t in report.tensors) == expected_differs
    for t in report.tensors:
        assert t.share_nearest_level_differs == pytest.approx(t.values_nearest_level_differs / t.values)
    code = main_code(["checkpoint", "grid-check", str(build), "--reference", str(tmp_path / "ref"), "--json"])
    assert code == 1
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["values_nearest_level_differs"] == expected_differs
    assert as_json["values_off_by_a_level_or_more"] == expected_off
    assert main_code(["checkpoint", "grid-check", str(build), "--reference", str(tmp_path / "ref")]) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert f"{expected_off:,} of {total:,} values ({expected_off / total:.1%}) off by one reference-grid level" in text
    assert f"{expected_differs:,} ({expected_differs / total:.1%}) nearest another reference-grid level" in text


def main_code(args: list[str]) -> int:
    from gemmaserve.cli.errors import run_with_error_mapping

    return run_with_error_mapping(app, args, debug=False)


_STORAGE = ("reference", "reference_bytes_fetched", "tensors")


@pytest.mark.parametrize("kernel", ["numpy", "numba-dispatch", "auto"], ids=["numpy", "dispatch", "native"])
@pytest.mark.parametrize("dtype", ["F32", "F16"])
def test_a_widened_copy_of_a_bf16_reference_is_measured_as_the_bf16_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], dtype: str, kernel: str
) -> None:
    """A bf16 export saved after .float() (or .half(): these values fit F16 exactly) holds the same values: the
    same grid, the same counts, in every kernel path; the report says how it was stored."""
    from gemmaserve.checkpoint import grid

    if kernel != "numpy":
        pytest.importorskip("numba")
    monkeypatch.setenv(grid.KERNEL_ENV, kernel)
    truth = write_weight_reference(tmp_path / "bf16", seed=5)
    write_weight_reference(tmp_path / dtype, seed=5, dtype=dtype)
    build = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "g128", group_size=128)
    as_bf16 = grid_check(str(build), str(tmp_path / "bf16"))
    widened = grid_check(str(build), str(tmp_path / dtype))
    assert widened.model_dump(exclude=set(_STORAGE)) == as_bf16.model_dump(exclude=set(_STORAGE))
    assert widened.values_off_by_a_level_or_more > 0 and widened.reference_group_size == 32
    for wide, narrow in zip(widened.tensors, as_bf16.tensors, strict=True):
        assert wide.model_dump(exclude={"reference_dtype"}) == narrow.model_dump(exclude={"reference_dtype"})
        assert (wide.reference_dtype, wide.reference_grid_dtype) == (dtype, "BF16")
        assert (narrow.reference_dtype, narrow.reference_grid_dtype) == ("BF16", "BF16")
    lossless = write_requantized_build(
        {m: v for m, (v, _) in truth.items()},
        tmp_path / "g32",
        group_size=32,
        steps={m: s for m, (_, s) in truth.items()},
    )
    assert grid_check(str(lossless), str(tmp_path / dtype)).verdict == "bit-identical"
    assert main_code(["checkpoint", "grid-check", str(lossless), "--reference", str(tmp_path / dtype)]) == 0
    assert f"bf16 values stored as {dtype}" in " ".join(capsys.readouterr().out.split())


def _write_f32(root: Path, values: dict[str, np.ndarray]) -> Path:
    from safetensors.numpy import save_file

    from tests.support.checkpoint.builders import config

    root.mkdir(parents=True)
    save_file({f"{m}.weight": v.astype("<f4") for m, v in values.items()}, str(root / "model.safetensors"))
    (root / "config.json").write_text(json.dumps(config()))
    return root


def test_an_f32_reference_on_an_f32_grid_is_measured_on_it(tmp_path: Path) -> None:
    """Values that are exactly q * step in float32 (steps that are not bf16 values, products bf16 cannot hold):
    not a bf16 export, but a 4-bit grid all the same, measured in its own float32 terms."""
    rng = np.random.default_rng(8)
    values, steps = {}, {}
    for module, (rows, cols) in GRID_MODULES.items():
        levels = rng.integers(-8, 8, size=(rows, cols // 32, 32)).astype(np.float32)
        levels[..., 0] = -8
        step = rng.uniform(0.002, 0.05, size=(rows, cols // 32)) * rng.choice([-1, 1], size=(rows, cols // 32))
        steps[module] = step.astype(np.float32)
        values[module] = (levels * steps[module][..., None]).reshape(rows, cols)
    assert (values[next(iter(values))].view(np.uint32) & 0xFFFF).any()  # not bf16 values
    reference = _write_f32(tmp_path / "f32-grid", values)
    same = grid_check(str(_write_f32(tmp_path / "f32-build", values)), str(reference))  # a 32-bit build
    assert same.verdict == "bit-identical" and same.reference_group_size == 32
    assert {(t.reference_dtype, t.reference_grid_dtype) for t in same.tensors} == {("F32", "F32")}
    # Each value moved by 0.6 of its step towards the next level up: none off by a whole level; each nearest that
    # next level, except at the top level (7), past which the nearest level is still 7.
    moved, at_top = {}, 0
    for module, v in values.items():
        step = np.repeat(steps[module], 32, axis=1)
        moved[module] = v + np.float32(0.6) * step
        at_top += int(np.count_nonzero(np.rint(v / step) == 7))
    shifted = grid_check(str(_write_f32(tmp_path / "shifted", moved)), str(reference))
    assert shifted.values_off_by_a_level_or_more == 0
    assert shifted.values_nearest_level_differs == shifted.values - at_top > 0


def test_an_f32_reference_that_is_not_bf16_values_and_on_no_grid_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A float32 training checkpoint (QAT's latent weights, say) is not the export: refused, saying it was read as
    bf16, f16 and f32 values and that its values are not bf16 values."""
    rng = np.random.default_rng(9)
    master = _write_f32(
        tmp_path / "f32-master",
        {m: (rng.standard_normal(shape) * 0.02).astype(np.float32) for m, shape in GRID_MODULES.items()},
    )
    truth = write_weight_reference(tmp_path / "bf16", seed=5)
    build = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "g128", group_size=128)
    with pytest.raises(OffGrid) as refused:
        grid_check(str(build), str(master))
    message = str(refused.value)
    assert "stored as F32" in message and "not bf16 values" in message
    assert "as bf16 values" in message and "as f32 values" in message
    assert main_code(["checkpoint", "grid-check", str(build), "--reference", str(master), "--json"]) == 1
    out, err = capsys.readouterr()
    refusal = json.loads(out)  # --json: the refusal as one JSON document
    assert refusal["error"] == "OffGrid" and "stored as F32" in refusal["message"] and "Traceback" not in err
    assert "verdict" not in refusal
