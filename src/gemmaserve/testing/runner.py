"""Start the mock server for a test or a benchmark: in a thread (same process) or as a subprocess.

A thread is simplest for functional tests; timing measurements want the server in
its own process (``start_mock_process``), optionally several sharing one port,
so the server's CPU does not compete with the client's under the GIL.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import urllib.request
from dataclasses import asdict
from typing import Any, Self

from gemmaserve.testing.mock_server import MockConfig, MockServer, bind_socket, serve


class ThreadedMockServer:
    """A running in-process server; ``url`` is ``http://127.0.0.1:PORT``. Use as a context manager."""

    def __init__(self, server: MockServer, host: str = "127.0.0.1", port: int = 0) -> None:
        self.server = server
        self._sock = bind_socket(host, port)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._run, name="gemmaserve-mock-server", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._task = self._loop.create_task(serve(self.server, self._sock, lambda _port: self._ready.set()))
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        finally:
            self._loop.close()

    def start(self) -> ThreadedMockServer:
        if self._thread.is_alive():
            return self
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("mock server did not start within 10 s")
        return self

    def configure(self, **changes: Any) -> MockConfig:
        """Change settings between requests (thread-safe: one attribute swap)."""
        self.server.config = self.server.config.updated(changes)
        return self.server.config

    def stop(self) -> None:
        if self._task is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(10)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_mock_thread(config: MockConfig | None = None, **kwargs: Any) -> ThreadedMockServer:
    return ThreadedMockServer(MockServer(config, **kwargs)).start()


class MockProcess:
    """Mock server process(es) sharing one port (``SO_REUSEPORT``): the kernel spreads connections."""

    def __init__(self, processes: list[subprocess.Popen[str]], url: str, own_urls: list[str] | None = None) -> None:
        self.processes = processes
        self.url = url
        # With ``record``: one URL per process that reaches only that process (its /mock/requests).
        self.own_urls = own_urls or []

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def mock_args(config: MockConfig) -> list[str]:
    values = asdict(config)
    args = [
        f"--ttft-ms={values['ttft_s'] * 1000}",
        f"--itl-ms={values['itl_s'] * 1000}",
        f"--fixed-cost-ms={values['fixed_cost_s'] * 1000}",
        f"--tokens-per-chunk={values['tokens_per_chunk']}",
        f"--natural-tokens={values['natural_tokens']}",
        f"--model={values['model']}",
        f"--fault-every={values['fault_every']}",
        f"--hang-s={values['hang_s']}",
    ]
    if config.empty_text_every:
        args.append(f"--empty-text-every={config.empty_text_every}")
    if config.fault:
        args.append(f"--fault={config.fault}")
    if config.reply_text:
        args.append(f"--reply-text={config.reply_text}")
    if config.record:
        args.append("--record")
    return args


def start_mock_process(config: MockConfig | None = None, *, shards: int = 1, host: str = "127.0.0.1") -> MockProcess:
    """Start ``shards`` server processes on one free port; returns when all accept connections."""
    config = config or MockConfig()
    probe = bind_socket(host, 0, reuse_port=True)  # reserve a port every shard can also bind
    port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "gemmaserve.testing.mock_server",
        f"--host={host}",
        f"--port={port}",
        "--reuse-port",
        *mock_args(config),
    ]
    processes = []
    own_urls = []
    try:
        for _ in range(shards):
            process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ})
            processes.append(process)
            line = process.stdout.readline() if process.stdout else ""
            if not line.startswith("listening on"):
                raise RuntimeError(f"mock server shard failed to start: {line!r}")
            if " own " in line:
                own_urls.append(line.split(" own ", 1)[1].strip())
    except BaseException:
        MockProcess(processes, "").stop()
        raise
    finally:
        probe.close()
    return MockProcess(processes, f"http://{host}:{port}", own_urls)


def fetch_json(url: str, *, method: str = "GET", body: Any = None) -> Any:
    """A tiny blocking JSON call for test set-up (stdlib only, loopback only)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())
