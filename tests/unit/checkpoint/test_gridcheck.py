from __future__ import annotations

from pathlib import Path

import pytest

from gemmaserve.checkpoint import grid_check, repack_checkpoint
from gemmaserve.checkpoint.gridcheck import GridScope
from gemmaserve.errors import UsageError
from tests.support.checkpoint.builders import PREFIX, write_awq_build, write_observer_build


def test_a_faithful_repack_is_bit_identical(unquantized_dir: Path, tmp_path: Path) -> None:
    repack_checkpoint(unquantized_dir, tmp_path / "ct")
    report = grid_check(str(tmp_path / "ct"), str(unquantized_dir))
    assert report.verdict == "bit-identical"
    assert report.values == report.values_bit_identical == 77824
    assert report.groups_bit_identical == report.groups and report.values_off_by_a_level_or_more == 0
    assert report.max_abs_diff == 0.0
    assert all(t.reference_groups_on_grid == t.groups for t in report.tensors)


def test_an_awq_build_moves_weights_off_the_grid(unquantized_dir: Path, tmp_path: Path) -> None:
    build = write_awq_build(unquantized_dir, tmp_path / "awq")
    report = grid_check(str(build), str(unquantized_dir), GridScope(tensor=f"{PREFIX}.layers.0.self_attn.q_proj"))
    [only] = report.tensors
    assert only.build_format == "awq-gemm" and only.values == 64 * 64
    assert report.verdict == "off-grid"
    assert 0.02 < report.share_off_by_a_level_or_more < 0.9
    assert report.values_bit_identical < report.values and report.mean_abs_diff > 0


def test_the_compressed_tensors_observer_rule_is_not_the_qat_grid(unquantized_dir: Path, tmp_path: Path) -> None:
    build = write_observer_build(unquantized_dir, tmp_path / "observer")
    report = grid_check(str(build), str(unquantized_dir), GridScope(layers="1"))
    assert {t.tensor.split(".layers.")[1][0] for t in report.tensors} == {"1"}
    # absmax/7.5 stretches the step by 8/7.5: most values move, but by less than one level.
    assert report.values_bit_identical < 0.9 * report.values
    assert report.values_off_by_a_level_or_more == 0 and report.verdict == "on-grid-rounding"
    assert 0 < report.max_abs_diff


def test_selection_errors_are_usage_errors(unquantized_dir: Path, tmp_path: Path) -> None:
    repack_checkpoint(unquantized_dir, tmp_path / "ct")
    with pytest.raises(UsageError, match="no tensor"):
        grid_check(str(tmp_path / "ct"), str(unquantized_dir), GridScope(tensor="model.nothing"))
    with pytest.raises(UsageError, match="--layers"):
        grid_check(str(tmp_path / "ct"), str(unquantized_dir), GridScope(layers="a-b"))


def _poison(build: Path, tensor: str, value: float) -> int:
    """Set every element of ``tensor`` in the build's shard to ``value``; returns how many values it scales."""
    import json

    import torch
    from safetensors.torch import load_file, save_file

    shard = build / json.loads((build / "model.safetensors.index.json").read_text())["weight_map"][tensor]
    tensors = load_file(shard)
    tensors[tensor] = torch.full_like(tensors[tensor], value)
    save_file(tensors, shard, metadata={"format": "pt"})
    packed = tensors[tensor.replace("weight_scale", "weight_packed")]
    return packed.shape[0] * packed.shape[1] * 8


@pytest.mark.parametrize("kernel", ["numpy", "numba-dispatch", "auto"], ids=["numpy", "dispatch", "native"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_scales_make_the_verdict_invalid(
    unquantized_dir: Path,
    tmp_path: Path,
    bad: float,
    kernel: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In every kernel path: NaN and inf are named, make the verdict invalid, move neither measure, and --json
    stays standard JSON."""
    import json

    from gemmaserve.checkpoint import grid
    from gemmaserve.cli import app
    from gemmaserve.cli.errors import run_with_error_mapping

    if kernel != "numpy":
        pytest.importorskip("numba")
    monkeypatch.setenv(grid.KERNEL_ENV, kernel)
    build = tmp_path / "ct"
    repack_checkpoint(unquantized_dir, build)
    poisoned = _poison(build, f"{PREFIX}.layers.0.self_attn.q_proj.weight_scale", bad)
    report = grid_check(str(build), str(unquantized_dir))
    assert report.verdict == "invalid"
    assert report.values_not_finite == poisoned
    [named] = [t for t in report.tensors if t.values_not_finite]
    assert named.tensor == f"{PREFIX}.layers.0.self_attn.q_proj"
    assert report.max_abs_diff is None and named.max_abs_diff is None  # no number measured on bad values
    assert report.values_nearest_level_differs == named.values_nearest_level_differs == 0
    # An inf scale moves every value by inf (off by a level); a NaN scale moves none measurably.
    assert named.values_off_by_a_level_or_more == (0 if bad != bad else poisoned - _zero_levels(build, named.tensor))
    code = run_with_error_mapping(app, ["checkpoint", "grid-check", str(build), "--reference", str(unquantized_dir),
                                        "--json"], debug=False)  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    assert "NaN" not in out and "Infinity" not in out
    parsed = json.loads(out)
    assert parsed["verdict"] == "invalid" and parsed["values_nearest_level_differs"] == 0
    assert parsed["ok"] is False


def _zero_levels(build: Path, module: str) -> int:
    """Values stored at level 0 (nibble 8): 0 * inf is NaN, not inf."""
    import json

    import numpy as np
    from safetensors import safe_open

    index = json.loads((build / "model.safetensors.index.json").read_text())["weight_map"]
    with safe_open(build / index[f"{module}.weight_packed"], "pt") as shard:
        packed = shard.get_tensor(f"{module}.weight_packed").numpy()
    nibbles = (packed.astype("<i4").view(np.uint32)[..., None] >> np.arange(0, 32, 4, dtype=np.uint32)) & 0xF
    return int(np.count_nonzero(nibbles == 8))


def test_a_narrow_terminal_folds_tensor_names_instead_of_cutting_them(unquantized_dir: Path, tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from gemmaserve.views import page_for
    from gemmaserve.views.page import Table, plain_lines
    from gemmaserve.views.terminal import column_widths, draw

    repack_checkpoint(unquantized_dir, tmp_path / "ct")
    report = grid_check(str(tmp_path / "ct"), str(unquantized_dir), GridScope(layers="0"))
    screen = io.StringIO()
    draw(page_for(report), Console(file=screen, width=100, soft_wrap=False))
    text = screen.getvalue()
    assert "…" not in text
    [shown] = [block for block in page_for(report).blocks if isinstance(block, Table)]
    width = column_widths(shown, 100)[0]
    assert width is not None and width >= 16  # too wide for 100 columns: the names are folded
    lines = text.splitlines()
    body = lines[next(i for i, line in enumerate(lines) if line.lstrip().startswith("─")) + 1 :]
    body = body[: next(i for i, line in enumerate(body) if not line.strip())]
    assert max(len(line) for line in body) <= 100  # the table fits (the verdict line after it wraps as text)
    # The first column, read down, is every tensor name whole, in order: folded, never cut.
    assert "".join(line[:width].rstrip() for line in body) == "".join(t.tensor for t in report.tensors)
    for tensor in report.tensors:
        assert f"{tensor.values:,}" in text  # the counts are never folded mid-number
    # Off a terminal each tensor's row is one line, its name whole (for grep).
    rows = [line for line in plain_lines(page_for(report)) if line.startswith("model.")]
    assert [line.split()[0] for line in rows] == [tensor.tensor for tensor in report.tensors]


def test_a_16_bit_build_is_checked_without_naming_a_tensor(unquantized_dir: Path, tmp_path: Path) -> None:
    """A bf16 copy of the reference (what a dequantized build looks like) is measured layer by layer."""
    import shutil

    copy = tmp_path / "bf16-copy"
    shutil.copytree(unquantized_dir, copy)
    report = grid_check(str(copy), str(unquantized_dir))
    assert report.verdict == "bit-identical" and report.values == 77824
    assert {t.build_format for t in report.tensors} == {"16-bit"}


def test_a_wrong_dtype_weight_packed_is_named_not_misread(
    unquantized_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from safetensors.torch import load_file, save_file

    from gemmaserve.cli import app
    from gemmaserve.cli.errors import run_with_error_mapping

    build = tmp_path / "ct"
    repack_checkpoint(unquantized_dir, build)
    name = f"{PREFIX}.layers.0.self_attn.q_proj.weight_packed"
    shard_name = json.loads((build / "model.safetensors.index.json").read_text())["weight_map"][name]
    tensors = load_file(build / shard_name)
    tensors[name] = tensors[name].view(dtype=__import__("torch").float32)  # same bytes, another dtype
    save_file(tensors, build / shard_name, metadata={"format": "pt"})
    args = ["checkpoint", "grid-check", str(build), "--reference", str(unquantized_dir), "--layers", "0"]
    code = run_with_error_mapping(app, args, debug=False)
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert f"Build {build}" in err and shard_name in err and "is F32; it should hold packed int4 words" in err
