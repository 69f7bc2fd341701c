"""turing_apply / verify / revert on a copy of a real vLLM kernel file: agree with the CLI, confirmation,
refusal of an unrecognised file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmaserve.mcp_server import build_server
from tests.support.mcp.fixtures import call_tool, cli_json, error_details, error_text
from tests.support.turing.fixtures import vllm_kernel_files  # noqa: F401 - the session fixture (fetched once, cached)


@pytest.fixture
def kernel_file(vllm_kernel_files: dict[str, Path], tmp_path: Path) -> Path:  # noqa: F811
    newest = max(vllm_kernel_files, key=lambda version: tuple(int(p) for p in version.split(".")[:3]))
    from tests.support.turing.fixtures import installed_copy

    return installed_copy(vllm_kernel_files[newest], newest, tmp_path / "site-packages")


def test_apply_verify_revert_agree_with_the_cli(kernel_file: Path) -> None:
    server = build_server()
    original = kernel_file.read_bytes()
    path = str(kernel_file)

    before = call_tool(server, "turing_verify", {"file": path})
    assert before.structured_content == cli_json("turing", "verify", "--file", path, exit_code=1)
    assert before.structured_content["ok"] is False  # type: ignore[index]

    dry = call_tool(server, "turing_apply", {"file": path, "dry_run": True, "confirm": False})
    assert dry.structured_content == cli_json("turing", "apply", "--file", path, "--dry-run")
    assert dry.structured_content["action"] == "would-apply" and kernel_file.read_bytes() == original  # type: ignore[index]

    refused = call_tool(server, "turing_apply", {"file": path, "confirm": False})
    assert error_details(refused)["error"] == "ConfirmationRequired"
    assert kernel_file.read_bytes() == original

    applied = call_tool(server, "turing_apply", {"file": path, "confirm": True})
    assert applied.structured_content["action"] == "applied"  # type: ignore[index]
    assert call_tool(server, "turing_verify", {"file": path}).structured_content == cli_json(
        "turing", "verify", "--file", path
    )
    again = call_tool(server, "turing_apply", {"file": path, "confirm": True})
    assert again.structured_content == cli_json(
        "turing", "apply", "--file", path, "--yes"
    )  # already-applied both times
    assert again.structured_content["action"] == "already-applied"  # type: ignore[index]

    reverted = call_tool(server, "turing_revert", {"file": path, "confirm": True})
    assert reverted.structured_content["action"] == "reverted"  # type: ignore[index]
    assert kernel_file.read_bytes() == original


def test_unrecognised_file_is_refused_unchanged(tmp_path: Path) -> None:
    other = tmp_path / "triton_unified_attention.py"
    other.write_text("def something_else():\n    return 1\n")
    result = call_tool(build_server(), "turing_apply", {"file": str(other), "confirm": True})
    assert error_details(result)["error"] == "UnrecognisedSource"
    assert "Fix:" in error_text(result) or "Details:" in error_text(result)
    assert other.read_text() == "def something_else():\n    return 1\n"


def test_status_equals_the_cli_for_a_t4_before_and_after_the_patch(
    vllm_kernel_files: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    from tests.support.turing.fakes import fake_interpreter

    python = str(fake_interpreter(tmp_path, vllm_kernel_files["0.34.0"], "0.34.0", with_site_packages=False))
    server = build_server()
    before = call_tool(server, "turing_status", {"python": python, "capability": "7.5"})
    expected = cli_json("turing", "status", "--python", python, "--capability", "7.5", exit_code=1)
    assert before.structured_content == expected
    assert expected["clamp_needed"] is True and expected["engine_would_start"] is False
    assert "would NOT start" in before.content[0].text  # type: ignore[union-attr]

    kernel = expected["kernel_file"]
    assert (
        call_tool(server, "turing_apply", {"python": python, "confirm": True}).structured_content[  # type: ignore[index]
            "target"
        ]["path"]
        == kernel
    )
    after = call_tool(server, "turing_status", {"python": python, "capability": "7.5"})
    assert after.structured_content == cli_json("turing", "status", "--python", python, "--capability", "7.5")
    assert after.structured_content["engine_would_start"] is True  # type: ignore[index]


def test_smem_equals_the_cli(vllm_kernel_files: dict[str, Path]) -> None:  # noqa: F811
    pytest.importorskip("triton")
    kernel = str(vllm_kernel_files["0.34.0"])
    result = call_tool(build_server(), "turing_smem", {"vllm_file": kernel, "head_size": [512]})
    assert not result.is_error, result.content
    assert result.structured_content == cli_json("turing", "smem", "--vllm-file", kernel, "--head-size", "512")
    assert result.structured_content["stock_fits"] is False  # type: ignore[index]
    assert result.structured_content["clamped_fits"] is True  # type: ignore[index]


def test_smem_search_equals_the_cli(vllm_kernel_files: dict[str, Path]) -> None:  # noqa: F811
    """One tool, two documents: the search's output validates against the tool's one output schema."""
    pytest.importorskip("triton")
    kernel = str(vllm_kernel_files["0.34.0"])
    result = call_tool(build_server(), "turing_smem", {"vllm_file": kernel, "head_size": [512], "search": True})
    assert not result.is_error, result.content
    expected = cli_json("turing", "smem", "--vllm-file", kernel, "--head-size", "512", "--search")
    assert result.structured_content == expected
    assert expected["rule_agrees"] is True and {pick["layout"] for pick in expected["picks"]} == {"2D", "3D"}
    assert "agrees" in result.content[0].text  # type: ignore[union-attr]


def test_smem_rejects_the_old_argument_name() -> None:
    result = call_tool(build_server(), "turing_smem", {"head_sizes": [512]})
    text = error_text(result)
    assert "unknown argument 'head_sizes'" in text and "Did you mean 'head_size'?" in text


def test_smem_without_a_local_vllm_names_vllm_file(tmp_path: Path) -> None:
    from tests.integration.turing.test_requests import no_vllm_interpreter

    result = call_tool(build_server(), "turing_smem", {"python": str(no_vllm_interpreter(tmp_path))})
    details = error_details(result)
    assert details["error"] == "UsageError" and "--vllm-file PATH" in details["hint"]
    assert "Fix: Pass --vllm-file PATH" in error_text(result)


def test_revert_needs_confirm_except_as_a_dry_run(kernel_file: Path) -> None:
    server = build_server()
    path = str(kernel_file)
    assert call_tool(server, "turing_apply", {"file": path, "confirm": True}).structured_content["changed"]  # type: ignore[index]
    patched = kernel_file.read_bytes()
    refused = call_tool(server, "turing_revert", {"file": path, "confirm": False})
    assert error_details(refused)["error"] == "ConfirmationRequired"
    assert "remove the Turing clamp from" in error_text(refused) and kernel_file.read_bytes() == patched
    dry = call_tool(server, "turing_revert", {"file": path, "dry_run": True, "confirm": False})
    assert dry.structured_content == cli_json("turing", "revert", "--file", path, "--dry-run")
    assert dry.structured_content["action"] == "would-revert" and kernel_file.read_bytes() == patched  # type: ignore[index]


def test_file_and_python_together_are_refused(kernel_file: Path) -> None:
    result = call_tool(build_server(), "turing_verify", {"file": str(kernel_file), "python": "/usr/bin/python3"})
    assert error_details(result)["error"] == "UsageError"
    assert "Give --file (file) or --python (python), not both" in error_text(result)
