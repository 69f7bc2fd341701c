"""Checkpoint fixtures: a generated -qat-q4_0-unquantized directory, a fake hub on 127.0.0.1, and a private
cache directory for the kernels' object code (built once per test session, never in the user's cache).

The fake hub serves real files under /{repo}/resolve/{revision}/{path} with
HTTP Range support and counts the bytes it sends per file, so tests can assert
that inspect and grid-check fetch kilobytes, never the weights.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gemmaserve.checkpoint import grid
from tests.support.checkpoint.builders import write_unquantized


@pytest.fixture(scope="session", autouse=True)
def kernel_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """XDG_CACHE_HOME for the session: the first test that needs the compiled kernels builds their object there."""
    home = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(home))
        grid._load_native.cache_clear()
        yield home / "gemmaserve" / "kernels"
    grid._load_native.cache_clear()


@pytest.fixture(scope="session")
def unquantized_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_unquantized(tmp_path_factory.mktemp("ckpt") / "gemma-4-tiny-qat-q4_0-unquantized")


class FakeHub:
    def __init__(self, repos: dict[str, Path]) -> None:
        self.repos = repos
        self.bytes_sent: Counter[str] = Counter()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # head and body are two writes: no delayed-ACK wait between them

            def log_message(self, *args: object) -> None:
                return None

            def _resolve(self) -> tuple[str, Path | None]:
                parts = self.path.split("?")[0].lstrip("/").split("/")
                if len(parts) < 5 or parts[2] != "resolve":
                    return "", None
                repo, name = "/".join(parts[:2]), "/".join(parts[4:])
                root = hub.repos.get(repo)
                if root is None:
                    return "RepoNotFound", None
                file = root / name
                return ("", file) if file.is_file() else ("EntryNotFound", None)

            def do_GET(self) -> None:
                code, file = self._resolve()
                if file is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", code or "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = file.read_bytes()
                start, end, status = 0, len(data), 200
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    lo, _, hi = rng[6:].partition("-")
                    start, end, status = int(lo), min(len(data), int(hi) + 1 if hi else len(data)), 206
                body = data[start:end]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", '"fake"')
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
                # Count before sending: the client may read the counter as soon as it has the body.
                hub.bytes_sent[self.path.split("?")[0].lstrip("/").replace("/resolve/main", "")] += len(body)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def api(self) -> object:
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.endpoint, token=False)


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    from huggingface_hub import constants

    # conftest switches the hub offline for every test; these tests talk to a loopback hub.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    hub = FakeHub({})
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    hub.thread.start()
    yield hub
    hub.server.shutdown()
    hub.server.server_close()
