"""The guard in conftest must refuse anything but loopback, or no test is hermetic."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import NetworkAccessBlocked

ROOT = Path(__file__).resolve().parents[2]


def test_non_loopback_connect_is_refused() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock, pytest.raises(NetworkAccessBlocked):
        sock.connect(("93.184.216.34", 443))


def test_name_resolution_of_real_hosts_is_refused() -> None:
    with pytest.raises(NetworkAccessBlocked):
        socket.getaddrinfo("runtime.sagemaker.us-east-1.amazonaws.com", 443)


def test_loopback_is_allowed() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=2):
            pass


def test_without_the_cache_the_vllm_source_tests_skip_naming_the_fill_command(tmp_path: Path) -> None:
    """The guard covers this process only: the tests that need vLLM's sources must read them from the
    cache, never fetch them (not even through a subprocess), and without it skip rather than pass."""
    empty_cache = tmp_path / "cache"
    empty_cache.mkdir()
    tests = [
        "tests/integration/turing/test_filepatch.py::test_every_tested_release_is_on_the_index_and_new_ones_are_reported",
        "tests/integration/turing/test_filepatch.py::test_apply_verify_reapply_revert_round_trip[0.34.0]",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env={**os.environ, "GEMMASERVE_TEST_CACHE": str(empty_cache)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and "2 skipped" in done.stdout, done.stdout + done.stderr
    skips = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 2 and all("python tools/fetch_vllm_sources.py" in line for line in skips), skips
    assert list(empty_cache.rglob("*")) == []  # nothing was fetched into it


def test_no_test_runs_the_fill() -> None:
    """Only the documented step fills the cache: no test calls the network half of the tool, runs it as a
    program, or calls its ``main``."""
    fill_calls = re.compile(r"\b(fetch_kernel_file|store_released_versions|released_versions)\(")
    offenders = []
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path == Path(__file__):
            continue
        if fill_calls.search(text):
            offenders.append(f"{path.relative_to(ROOT)} calls the fill")
        if "fetch_vllm_sources" in text and re.search(r"\bsubprocess\b|\bmain\(", text):
            offenders.append(f"{path.relative_to(ROOT)} names the tool and runs programs or its main")
    assert offenders == []
