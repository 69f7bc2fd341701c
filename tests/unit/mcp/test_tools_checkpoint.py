"""Checkpoint tools on a generated -qat-q4_0-unquantized checkpoint: repack, inspect, validate, grid-check
agree with the CLI's --json; progress per tensor; a cancelled repack writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from gemmaserve.mcp_server import build_server
from tests.support.mcp.fixtures import ProgressLog, call_tool, cli_json, error_details, error_text


@pytest.fixture(scope="module")
def unquantized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.checkpoint.builders import write_unquantized

    return write_unquantized(tmp_path_factory.mktemp("ckpt") / "gemma-4-tiny-qat-q4_0-unquantized")


def _without_paths(report: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in keys}


def test_repack_inspect_validate_grid_check_agree_with_the_cli(unquantized: Path, tmp_path: Path) -> None:
    server = build_server()
    progress = ProgressLog()
    out = tmp_path / "mcp-w4a16"
    repacked = call_tool(server, "checkpoint_repack", {"src": str(unquantized), "out": str(out)}, progress=progress)
    assert not repacked.is_error, repacked.content
    report = repacked.structured_content
    assert report["values_bit_exact"] == report["values_quantized"] > 0  # type: ignore[index]
    cli_out = tmp_path / "cli-w4a16"
    expected = cli_json("checkpoint", "repack", str(unquantized), str(cli_out))
    assert _without_paths(report, "output", "manifest") == _without_paths(expected, "output", "manifest")  # type: ignore[arg-type]
    assert progress.updates and all(message and message.startswith("packing ") for _, _, message in progress.updates)

    inspected = call_tool(server, "checkpoint_inspect", {"source": str(out)})
    assert inspected.structured_content == cli_json("checkpoint", "inspect", str(out))
    assert inspected.structured_content["quantization"] is not None  # type: ignore[index]

    validated = call_tool(server, "checkpoint_validate", {"source": str(out)})
    assert validated.structured_content == cli_json("checkpoint", "validate", str(out))
    assert validated.structured_content["ok"] is True  # type: ignore[index]

    checked = call_tool(server, "checkpoint_grid_check", {"build": str(out), "reference": str(unquantized)})
    assert checked.structured_content == cli_json("checkpoint", "grid-check", str(out), "--reference", str(unquantized))
    assert checked.structured_content["values_off_by_a_level_or_more"] == 0  # type: ignore[index]


def test_cancelled_repack_leaves_nothing(unquantized: Path, tmp_path: Path) -> None:
    server = build_server()
    out = tmp_path / "cancelled"
    seen: list[str] = []

    async def go() -> None:
        async with Client(server) as client, anyio.create_task_group() as group:

            async def cancel_at_first_tensor(progress: float, total: float | None, message: str | None) -> None:
                seen.append(message or "")
                group.cancel_scope.cancel()

            group.start_soon(
                lambda: client.call_tool(
                    "checkpoint_repack",
                    {"src": str(unquantized), "out": str(out)},
                    progress_callback=cancel_at_first_tensor,
                )
            )

    anyio.run(go)
    assert seen, "the repack never reported progress"
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no .partial directory either


def test_missing_checkpoint_is_an_error_with_the_fix(tmp_path: Path) -> None:
    result = call_tool(build_server(), "checkpoint_inspect", {"source": str(tmp_path / "nope")})
    assert error_details(result)["error"] == "CheckpointNotFound"


def test_grid_check_takes_the_reference_group_size_and_refuses_an_off_grid_reference(tmp_path: Path) -> None:
    from tests.support.checkpoint.builders import write_grid_reference, write_requantized_build

    truth = write_grid_reference(tmp_path / "ref", group_size=32)
    build = write_requantized_build({m: v for m, (v, _) in truth.items()}, tmp_path / "g128", group_size=128)
    server = build_server()
    args = {"build": str(build), "reference": str(tmp_path / "ref"), "reference_group_size": 32}
    checked = call_tool(server, "checkpoint_grid_check", args)
    assert not checked.is_error, checked.content
    assert checked.structured_content == cli_json(
        "checkpoint",
        "grid-check",
        str(build),
        "--reference",
        str(tmp_path / "ref"),
        "--reference-group-size",
        "32",
        exit_code=1,
    )
    assert checked.structured_content["reference_group_size"] == 32  # type: ignore[index]
    report: dict[str, Any] = checked.structured_content  # type: ignore[assignment]
    off, differs = report["values_off_by_a_level_or_more"], report["values_nearest_level_differs"]
    assert 0 < off < differs
    summary = " ".join(c.text for c in checked.content if hasattr(c, "text"))
    assert f"{off:,} of {report['values']:,} values" in summary
    assert f"{differs:,} (" in summary and "nearest another reference-grid level" in summary
    refused = call_tool(server, "checkpoint_grid_check", {**args, "reference_group_size": 128})
    assert error_details(refused)["error"] == "OffGrid"


def test_unknown_arguments_are_refused_with_the_names_it_takes(unquantized: Path) -> None:
    result = call_tool(build_server(), "checkpoint_inspect", {"source": str(unquantized), "revison": "main"})
    text = error_text(result)
    assert "unknown argument 'revison'" in text and "Did you mean 'revision'?" in text


def test_the_tools_refuse_what_the_cli_refuses_in_the_same_words(
    unquantized: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemmaserve.cli import main

    server = build_server()
    both = {"build": str(unquantized), "reference": str(unquantized), "tensor": "x.q_proj", "layers": "0"}
    cases = [
        ("checkpoint_grid_check", both, ["checkpoint", "grid-check", str(unquantized), "--reference", str(unquantized),
                                         "--tensor", "x.q_proj", "--layers", "0"]),
        ("checkpoint_grid_check", {"build": "b", "reference": "r", "layers": "5-3"},
         ["checkpoint", "grid-check", "b", "--reference", "r", "--layers", "5-3"]),
        ("checkpoint_grid_check", {"build": "b", "reference": "r", "reference_group_size": "rows"},
         ["checkpoint", "grid-check", "b", "--reference", "r", "--reference-group-size", "rows"]),
        ("checkpoint_repack", {"src": str(unquantized), "out": str(unquantized)},
         ["checkpoint", "repack", str(unquantized), str(unquantized)]),
    ]  # fmt: skip
    for tool, arguments, argv in cases:
        refused = error_details(call_tool(server, tool, arguments))
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2, argv
        assert refused["error"] == "UsageError", tool
        assert f"Error: {refused['message']}" in capsys.readouterr().err, argv
