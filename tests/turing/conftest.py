"""Real vLLM kernel files, fetched once per session by a subprocess (the socket guard covers this process only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gemmaserve.turing.versions import TESTED_VLLM_VERSIONS, is_supported

FETCHER = Path(__file__).with_name("vllm_sources.py")


@pytest.fixture(scope="session")
def vllm_kernel_files() -> dict[str, Path]:
    """{version: path} for every release in TESTED_VLLM_VERSIONS; a failed fetch fails the tests loudly."""
    done = subprocess.run(
        [sys.executable, str(FETCHER), *TESTED_VLLM_VERSIONS], capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"fetching the real vLLM sources failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    files = {}
    for line in done.stdout.splitlines():
        version, path = line.split(" ", 1)
        files[version] = Path(path)
    assert sorted(files) == sorted(TESTED_VLLM_VERSIONS)
    return files


_UNTESTED: list[str] = []


@pytest.fixture(scope="session")
def untested_vllm_releases() -> list[str]:
    """Filled by the release test; printed in the session summary rather than failing."""
    return _UNTESTED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _UNTESTED:
        terminalreporter.write_sep("-", "vLLM releases on the index that the Turing clamp has not studied")
        for version in _UNTESTED:
            verdict = (
                "inside the supported range: clamped when its source has the known shape"
                if is_supported(version)
                else "outside the supported range: the plugin guards head-512 launches, `turing apply` refuses"
            )
            terminalreporter.write_line(f"vLLM {version}: {verdict}")
        terminalreporter.write_line("Study their triton_unified_attention.py, then extend turing/versions.py.")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs the real vLLM files fetched from the package index carries the network marker."""
    for item in items:
        if {"vllm_kernel_files", "released_vllm_versions"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.network)


@pytest.fixture(scope="session")
def released_vllm_versions() -> list[str]:
    """Every release from 0.26.0 on, as the package index lists them now."""
    code = "import sys; sys.path.insert(0, sys.argv[1]); import vllm_sources; print(*vllm_sources.released_versions())"
    done = subprocess.run(
        [sys.executable, "-c", code, str(FETCHER.parent)], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"listing vLLM releases on the index failed:\n{done.stderr}", pytrace=False)
    return done.stdout.split()


def installed_copy(source: Path, version: str, site: Path) -> Path:
    """``source`` where a pip install of vLLM ``version`` puts it, with the package and dist-info around it
    (what ``turing apply --file`` reads the version from)."""
    target = site / "vllm" / "v1" / "attention" / "ops" / "triton_unified_attention.py"
    target.parent.mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    dist_info = site / f"vllm-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    target.write_bytes(source.read_bytes())
    return target


@pytest.fixture(params=TESTED_VLLM_VERSIONS)
def kernel_copy(request: pytest.FixtureRequest, vllm_kernel_files: dict[str, Path], tmp_path: Path) -> Path:
    """A writable copy of one release's real file, installed as pip installs it."""
    return installed_copy(vllm_kernel_files[request.param], request.param, tmp_path / "site-packages")
