"""doctor's request: the plan made once for the GPU and the vLLM found, ``--vllm``, and the checks judging that row."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmaserve.errors import UnknownName, UsageError
from gemmaserve.host.doctor import DoctorRequest, DoctorSources, doctor, vllm_rules
from gemmaserve.host.interpreter import InterpreterFacts
from gemmaserve.host.runner import CommandResult
from gemmaserve.plan import plan_deployment
from gemmaserve.vllm_releases import DEFAULT_SERIES
from tests.support.host.fixtures import probe_facts
from tests.support.mcp.fake_hosts import scripted_host


def test_the_plan_follows_the_installed_vllm_when_no_version_is_asked(tmp_path: Path) -> None:
    sources, python = scripted_host(tmp_path, gpu="t4")  # a healthy vLLM 0.29.0 install on a T4
    report = doctor(DoctorRequest(python=python, encoding="bf16"), sources=sources)
    assert report.plan is not None and report.plan.row is not None
    assert (report.plan.vllm_version, report.plan.vllm_from) == ("0.29", "the installed vLLM 0.29.0")
    assert report.plan.row == plan_deployment("gemma-4-e2b", "bf16", "t4", vllm="0.29")
    plan_check = next(check for check in report.checks if check.check == "gpu.plan")
    assert "vLLM 0.29 rules: the installed vLLM 0.29.0" in plan_check.detail


def test_vllm_asked_for_wins_and_every_serving_setting_reaches_the_one_row(tmp_path: Path) -> None:
    sources, python = scripted_host(tmp_path, gpu="l4")
    request = DoctorRequest(
        python=python,
        vllm="0.33.1",
        max_model_len=4096,
        gpu_memory_utilization=0.8,
        max_num_seqs=32,
        max_num_batched_tokens=4096,
        language_model_only=True,
    )
    report = doctor(request, sources=sources)
    assert report.plan is not None and report.plan.vllm_from == "--vllm 0.33.1"
    row = report.plan.row
    assert row is not None and row.vllm_version == "0.33" and row.gpu == "l4"
    assert (row.max_model_len, row.gpu_memory_utilization, row.max_num_seqs) == (4096, 0.8, 32)
    assert row.vllm_args[-3:] == ["--max-num-batched-tokens", "4096", "--language-model-only"]


def test_a_vllm_outside_the_plan_is_a_usage_error_before_any_probe(tmp_path: Path) -> None:
    probed: list[str] = []

    def meminfo() -> str:
        probed.append("/proc/meminfo")
        return ""

    def runner(argv: list[str], timeout_s: float) -> CommandResult:
        probed.append(argv[0])
        return CommandResult(argv=argv, returncode=1, stdout="", stderr="")

    sources = DoctorSources(read_meminfo=meminfo, runner=runner, which=lambda name: None, env={}, home=tmp_path)
    with pytest.raises(UsageError, match="outside the releases the plan follows"):
        doctor(DoctorRequest(python="/usr/bin/python3", vllm="0.20"), sources=sources)
    with pytest.raises(UnknownName):
        doctor(DoctorRequest(python="/usr/bin/python3", gpu="t5"), sources=sources)
    assert probed == []


def test_installed_vllm_outside_the_plan_falls_back_to_the_newest_and_says_so() -> None:
    facts = probe_facts("probe_healthy_t4.txt")
    newer = facts.model_copy(update={"vllm": facts.vllm.model_copy(update={"version": "0.40.2"})})
    assert vllm_rules(None, newer) == (
        DEFAULT_SERIES,
        "the newest: the installed vLLM 0.40.2 is outside 0.26-0.34, pass --vllm",
    )
    assert vllm_rules(None, None) == (DEFAULT_SERIES, "the newest: no vLLM in the target interpreter")
    assert vllm_rules("v0.30", facts) == ("0.30", "--vllm v0.30")
    no_vllm = InterpreterFacts.model_validate({})
    assert vllm_rules(None, no_vllm)[0] == DEFAULT_SERIES


def test_the_request_rejects_unknown_settings_and_bad_ranges() -> None:
    with pytest.raises(UsageError, match="--max-model-len"):
        DoctorRequest.parse({"max_model_len": 8})
    with pytest.raises(UsageError) as unknown:
        DoctorRequest.parse({"models": ["e2b"]})
    assert "--model" in (unknown.value.hint or "")
