"""``doctor`` through the real client on a scripted T4 host: fake nvidia-smi and interpreter binaries
print captured outputs of a real T4; /proc/meminfo is the published 7.8 GB host with no swap."""

from __future__ import annotations

from pathlib import Path

from gemmaserve.host.doctor import DoctorRequest, doctor
from gemmaserve.mcp_server import ServerDeps, build_server
from tests.support.mcp.fake_hosts import HOST_DATA, scripted_host
from tests.support.mcp.fixtures import call_tool, cli_json, error_details, error_text


def test_doctor_reports_the_no_swap_host_with_fixes(tmp_path: Path) -> None:
    sources, python = scripted_host(tmp_path, meminfo=(HOST_DATA / "meminfo_published_7_8gb_no_swap.txt").read_text())
    server = build_server(ServerDeps(doctor_sources=sources))
    result = call_tool(server, "doctor", {"python": python, "model": "gemma-4-e2b", "encoding": "bf16"})
    assert not result.is_error, result.content
    report = result.structured_content
    assert report == doctor(
        DoctorRequest(python=python, model="gemma-4-e2b", encoding="bf16"),  # the CLI's function, same inputs
        sources=sources,
    ).model_dump(mode="json")
    assert report["gpu"] == "t4" and report["ok"] is False  # type: ignore[index]
    statuses = {check["check"]: check["status"] for check in report["checks"]}  # type: ignore[index]
    failing = [check for check in report["checks"] if check["status"] == "fail"]  # type: ignore[index]
    assert failing and all(check["fix"] for check in failing), statuses
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("Host NOT ready for gemma-4-e2b bf16 (GPU t4")
    assert "Fix:" in text


def test_doctor_unknown_model_is_an_error_before_any_probe(tmp_path: Path) -> None:
    sources, _ = scripted_host(tmp_path)
    result = call_tool(build_server(ServerDeps(doctor_sources=sources)), "doctor", {"model": "gemma-5"})
    assert error_details(result)["error"] == "UnknownName"


def test_doctor_on_this_host_equals_the_cli(tmp_path: Path) -> None:
    _, python = scripted_host(tmp_path)  # only the interpreter is scripted: /proc, nvidia-smi, disks are real
    result = call_tool(build_server(), "doctor", {"python": python, "encoding": "bf16"})
    expected = cli_json(
        "doctor", "--python", python, "--encoding", "bf16", exit_code=0 if result.structured_content["ok"] else 1
    )  # type: ignore[index]

    def stable(report: dict) -> dict:  # type: ignore[type-arg]
        # Free RAM and disk move between two runs a second apart; everything else must agree.
        checks = [
            {k: v for k, v in check.items() if not (check["check"] in {"host.memory", "host.disk"} and k == "detail")}
            for check in report["checks"]
        ]
        return {**report, "checks": checks}

    assert stable(result.structured_content) == stable(expected)  # type: ignore[arg-type]


def test_doctor_rejects_an_unknown_argument_naming_the_nearest(tmp_path: Path) -> None:
    sources, python = scripted_host(tmp_path)
    result = call_tool(build_server(ServerDeps(doctor_sources=sources)), "doctor", {"python": python, "models": "e2b"})
    assert result.is_error
    assert "unknown argument 'models'" in error_text(result) and "Did you mean 'model'" in error_text(result)


def test_doctor_tool_takes_the_split_and_asks_its_questions(tmp_path: Path) -> None:
    sources, python = scripted_host(tmp_path)  # one T4: a split over two cannot pass
    result = call_tool(
        build_server(ServerDeps(doctor_sources=sources)),
        "doctor",
        {"python": python, "encoding": "bf16", "tensor_parallel_size": 2},
    )
    report = result.structured_content
    assert report == doctor(
        DoctorRequest(python=python, encoding="bf16", tensor_parallel_size=2), sources=sources
    ).model_dump(mode="json")
    statuses = {check["check"]: check["status"] for check in report["checks"]}  # type: ignore[index]
    assert statuses["gpu.count"] == "fail" and report["ok"] is False  # type: ignore[index]
    assert report["plan"]["row"]["tensor_parallel_size"] == 2  # type: ignore[index]
