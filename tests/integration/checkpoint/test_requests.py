"""The checkpoint request models: the rules both front ends share, the actions that take them, and their
progress and cancellation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gemmaserve.checkpoint import (
    GridCheckRequest,
    InspectRequest,
    RepackRequest,
    ValidateRequest,
    checkpoint_grid_check,
    checkpoint_inspect,
    checkpoint_repack,
    checkpoint_validate,
    inspect_checkpoint,
)
from gemmaserve.checkpoint.requests import parse_layers
from gemmaserve.cli import main
from gemmaserve.errors import UsageError
from gemmaserve.progress import Cancelled, CancelToken, ProgressEvent


def test_layers_are_numbers_and_ascending_ranges() -> None:
    assert parse_layers("0,3-5") == {0, 3, 4, 5}
    assert parse_layers(" 2 , 7 ") == {2, 7}
    for bad, words in [("a", "not a layer number"), ("-1", "not a layer number"), ("5-3", "runs backwards: write it as 3-5"),
                       (",", "names no layer"), ("1-", "not a layer number")]:  # fmt: skip
        with pytest.raises(ValueError, match=words):
            parse_layers(bad)
        with pytest.raises(UsageError, match=r"--layers \(layers\)"):
            GridCheckRequest.parse({"build": "b", "reference": "r", "layers": bad})


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, None), (32, 32), ("32", 32), (" 128 ", 128), ("channel", "channel"), ("Channel", "channel")],
)
def test_the_reference_group_size_is_a_size_or_channel(given: object, expected: object) -> None:
    request = GridCheckRequest.parse({"build": "b", "reference": "r", "reference_group_size": given})
    assert request.reference_group_size == expected


@pytest.mark.parametrize("bad", [0, -32, "0", "32.0", "rows", True, 32.5])
def test_a_bad_reference_group_size_is_refused_with_the_fix(bad: object) -> None:
    with pytest.raises(UsageError, match="expected a positive number of weights per group, or 'channel'"):
        GridCheckRequest.parse({"build": "b", "reference": "r", "reference_group_size": bad})


def test_tensor_and_layers_are_one_choice() -> None:
    with pytest.raises(UsageError, match="not both: --tensor checks one module"):
        GridCheckRequest.parse({"build": "b", "reference": "r", "tensor": "x.q_proj", "layers": "0"})
    assert GridCheckRequest.parse({"build": "b", "reference": "r", "layers": "0"}).tensor is None


@pytest.mark.parametrize("model", [InspectRequest, ValidateRequest])
def test_empty_names_and_unknown_settings_are_refused(model: type[InspectRequest | ValidateRequest]) -> None:
    with pytest.raises(UsageError, match=r"^SOURCE \(source\): "):
        model.parse({"source": ""})
    with pytest.raises(UsageError, match="--revision"):
        model.parse({"source": "google/x", "revision": ""})
    with pytest.raises(UsageError, match="revison") as unknown:
        model.parse({"source": "google/x", "revison": "main"})
    assert unknown.value.hint == "Known settings: SOURCE, --revision."
    with pytest.raises(UsageError, match=r"^OUT \(out\): "):
        RepackRequest.parse({"src": "a", "out": ""})


def test_none_of_them_needs_confirmation() -> None:
    # Repack only creates a new directory (and refuses an existing one); the others only read.
    for model in (InspectRequest, ValidateRequest, GridCheckRequest, RepackRequest):
        assert model.confirmation is False


def test_the_cli_refuses_both_tensor_and_layers_as_usage(
    unquantized_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["checkpoint", "grid-check", str(unquantized_dir), "--reference", str(unquantized_dir)]
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--tensor", "model.language_model.layers.0.mlp.up_proj", "--layers", "0"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Give --tensor (tensor) or --layers (layers), not both" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--layers", "3-1"])
    assert exit_.value.code == 2
    assert "runs backwards" in capsys.readouterr().err


def test_the_actions_take_their_requests(unquantized_dir: Path, tmp_path: Path) -> None:
    assert checkpoint_inspect(InspectRequest(source=str(unquantized_dir))) == inspect_checkpoint(str(unquantized_dir))
    events: list[ProgressEvent] = []
    report = checkpoint_repack(
        RepackRequest(src=str(unquantized_dir), out=str(tmp_path / "ct"), text_only=True), progress=events.append
    )
    assert report.text_only and report.values_bit_exact == report.values_quantized > 0
    assert events and {event.phase for event in events} == {"packing"}
    assert all(event.message.startswith("packing model.") and event.fraction is not None for event in events)
    assert checkpoint_validate(ValidateRequest(source=report.output)).ok
    checked = checkpoint_grid_check(
        GridCheckRequest(build=report.output, reference=str(unquantized_dir), layers="0"), progress=events.append
    )
    assert checked.verdict == "bit-identical" and all(".layers.0." in t.tensor for t in checked.tensors)
    assert events[-1].phase == "checking"


def test_a_repack_never_overwrites(unquantized_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "there"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="already exists"):
        checkpoint_repack(RepackRequest(src=str(unquantized_dir), out=str(out)))
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_a_cancelled_repack_stops_at_a_block_and_leaves_nothing(unquantized_dir: Path, tmp_path: Path) -> None:
    cancel = CancelToken()
    seen: list[ProgressEvent] = []

    def cancel_at_first(event: ProgressEvent) -> None:
        seen.append(event)
        cancel.cancel()

    with pytest.raises(Cancelled):
        checkpoint_repack(
            RepackRequest(src=str(unquantized_dir), out=str(tmp_path / "out")), progress=cancel_at_first, cancel=cancel
        )
    assert len(seen) == 1
    assert list(tmp_path.iterdir()) == []  # no output and no .partial directory


def test_a_cancelled_grid_check_stops_at_a_block(unquantized_dir: Path, tmp_path: Path) -> None:
    build = checkpoint_repack(RepackRequest(src=str(unquantized_dir), out=str(tmp_path / "ct"))).output
    cancel = CancelToken()
    seen: list[ProgressEvent] = []

    def cancel_at_first(event: ProgressEvent) -> None:
        seen.append(event)
        cancel.cancel()

    request = GridCheckRequest(build=build, reference=str(unquantized_dir))
    with pytest.raises(Cancelled):
        checkpoint_grid_check(request, progress=cancel_at_first, cancel=cancel)
    assert len(seen) == 1 and seen[0].phase == "checking"


def test_the_cli_module_imports_no_numpy() -> None:
    # `gemmaserve checkpoint --help` builds every option from the requests: they must not bring the math.
    code = "import sys, gemmaserve.cli.checkpoint; print(json.dumps(sorted(m for m in ('numpy', 'numba') if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_a_revision_is_given_once_and_only_for_a_hub_repo(unquantized_dir: Path) -> None:
    # A local directory has no revisions: --revision would be silently ignored.
    with pytest.raises(UsageError, match="--revision applies to Hub repos") as local:
        checkpoint_inspect(InspectRequest(source=str(unquantized_dir), revision="main"))
    assert local.value.hint and "Drop --revision" in local.value.hint
    # Two different revisions: which one was meant is not ours to guess.
    with pytest.raises(UsageError, match="two revisions"):
        checkpoint_validate(ValidateRequest(source="google/tiny@v1", revision="v2"))
