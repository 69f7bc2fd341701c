"""Fixtures every test gets: a private state directory, fake AWS credentials,
and a network guard that fails any connection to an address other than loopback.

Servers a test needs (moto, the streaming OpenAI-compatible server, a fake hub)
are started by fixtures on 127.0.0.1; the guard makes a stray real request fail
loudly instead of reaching AWS or the hub.

What is expensive and the same for every test is done once per session (per
worker under ``pytest -n``): moto's server (tests/support/sagemaker/fixtures.py), the
compiled checkpoint kernels (tests/support/checkpoint/fixtures.py), doctor's probe of this
interpreter and ptxas's reading of one PTX text (below); Triton keeps its own
compile cache (``~/.triton/cache``).
"""

from __future__ import annotations

import functools
import ipaddress
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


class NetworkAccessBlocked(RuntimeError):
    pass


def _is_loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _check_address(sock: socket.socket, address: Any) -> None:
    if sock.family == getattr(socket, "AF_UNIX", None):
        return
    host = address[0] if isinstance(address, tuple) else address
    if not _is_loopback(host):
        raise NetworkAccessBlocked(f"test tried to reach {address!r}; only loopback is allowed")


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check_address(self, address)
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check_address(self, address)
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    # Resolving a real name would already leak a DNS query; refuse it here.
    if host is not None and not _is_loopback(host):
        raise NetworkAccessBlocked(f"test tried to resolve {host!r}; only loopback is allowed")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def _network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)
    yield


@pytest.fixture(autouse=True)
def _hermetic_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("GEMMASERVE_STATE_DIR", str(state))
    # Fake credentials: a test that forgets its moto endpoint can never sign as a real user.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(state / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(state / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HOME", str(state / "hf"))
    monkeypatch.delenv("GEMMASERVE_DEBUG", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _ptxas_once_per_ptx() -> Iterator[None]:
    """ptxas reads each distinct PTX text once per session.

    ``turing smem`` compiles through Triton (whose own disk cache answers a repeat compile) and then
    runs ``ptxas -v`` on the PTX for registers and spills: ~1-2 s a launch, the cost of the tests that
    compare the MCP tool with the CLI on the same launches. ptxas is deterministic in its input, so the
    answer for a PTX text already read is the one it gave; every compile still goes through Triton and
    every distinct PTX through the real ptxas. (``turing smem`` run as a subprocess does not share this.)
    """
    from gemmaserve.turing import kernel_compile

    read_once = functools.lru_cache(maxsize=None)(kernel_compile.ptxas_figures)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernel_compile, "ptxas_figures", read_once)
        yield


@pytest.fixture(scope="session", autouse=True)
def _this_interpreter_probed_once() -> Iterator[None]:
    """doctor's probe of the test interpreter itself runs once per session.

    The probe imports torch in a fresh ``python -I`` (1-3 s); ``serve start``, ``doctor`` and their MCP
    tools run it for every case of tests/integration/test_redaction.py and tests/mcp. The interpreter and its packages
    do not change during a session, so its facts are the ones it gave; a probe that failed is not kept,
    and any other interpreter (the fakes the host and turing tests write) or runner is probed every time.
    """
    from gemmaserve.host import doctor
    from gemmaserve.host.runner import run_command

    real = doctor.probe_interpreter
    kept: dict[str, Any] = {}

    def probe(python: str, runner: Any = run_command, *args: Any, **kwargs: Any) -> Any:
        if python != sys.executable or runner is not run_command or args or kwargs:
            return real(python, runner, *args, **kwargs)
        if python not in kept:
            probed = real(python, runner)
            if probed.value is None:
                return probed
            kept[python] = probed
        return kept[python]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(doctor, "probe_interpreter", probe)
        yield


ONE_WORKER_DIRS = ("tests/engine/",)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``pytest -n N``: whole test files to a worker, and all of tests/engine to one worker.

    A file's module- and session-scoped fixtures (an engine, a moto server, a written checkpoint) are
    then made once, and the two real vLLM engines of tests/engine start one after the other on one
    worker while the other workers run the rest, instead of two engines fighting for the same cores.
    ``--dist`` other than the default (``load``) or ``loadfile`` is left to pytest-xdist.
    """
    if config.getoption("dist") not in ("load", "loadfile"):
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndOneEngineWorker(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for folder in ONE_WORKER_DIRS:
                if nodeid.startswith(folder):
                    return folder
            return str(super()._split_scope(nodeid))

        def _assign_work_unit(self, node: Any) -> None:
            # xdist hands out the files with the most tests first; the engines' minutes go first instead,
            # so the rest of the suite runs beside them rather than after them.
            for folder in reversed(ONE_WORKER_DIRS):
                if folder in self.workqueue:
                    self.workqueue.move_to_end(folder, last=False)
            super()._assign_work_unit(node)

    return FilesAndOneEngineWorker(config, log)


_UNTESTED_VLLM: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect what the Turing release test (tests/integration/turing/test_filepatch.py) found (its report carries it, from a worker under ``-n``)."""
    for key, versions in report.user_properties:
        if key == "untested_vllm_releases" and report.when == "call":
            _UNTESTED_VLLM.extend(version for version in versions if version not in _UNTESTED_VLLM)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _UNTESTED_VLLM:
        return
    from gemmaserve.turing.versions import is_supported

    terminalreporter.write_sep("-", "vLLM releases on the index that the Turing clamp has not studied")
    for version in _UNTESTED_VLLM:
        verdict = (
            "inside the supported range: clamped when its source has the known shape"
            if is_supported(version)
            else "outside the supported range: the plugin guards head-512 launches, `turing apply` refuses"
        )
        terminalreporter.write_line(f"vLLM {version}: {verdict}")
    terminalreporter.write_line("Study their triton_unified_attention.py, then extend turing/versions.py.")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs the real vLLM sources (tests/support/turing/fixtures.py) carries the vllm_sources marker (`-m "not vllm_sources"`)."""
    for item in items:
        if {"vllm_kernel_files", "released_vllm_versions"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.vllm_sources)


def pytest_configure(config: pytest.Config) -> None:
    """SIGHUP and SIGINT live, as in a terminal, also when the suite itself runs under ``nohup`` or in the
    background (a shell without job control starts ``cmd &`` with SIGINT ignored).

    A deploy leaves a stop signal alone when it starts ignored (that is how it survives ``nohup`` and
    ``&``; one test sets that up itself), and so does every Python process started with SIGINT ignored, so
    the tests that send SIGHUP or SIGINT need them live. Set here, before xdist starts its workers, so they
    and every process a test starts inherit it (a Python handler becomes the default across exec).
    """
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
