"""Scripted hosts for doctor and serve: fake ``nvidia-smi``, target interpreter and ``vllm`` executables.

The interpreter prints a captured probe of a real healthy install; ``vllm serve`` is a small
Python HTTP server that writes vLLM's start-up log lines and answers ``/health`` (or never
does, with ``FAKE_VLLM_NEVER_READY=1``).
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from gemmaserve.host.doctor import DoctorSources

HOST_DATA = Path(__file__).parent.parent / "host" / "data"

ROOMY_MEMINFO = """\
MemTotal:       65536000 kB
MemFree:        60000000 kB
MemAvailable:   62000000 kB
SwapTotal:      16777216 kB
SwapFree:       16777216 kB
"""

FAKE_VLLM = """\
import http.server, os, sys, time
port = int(sys.argv[sys.argv.index("--port") + 1])
print("INFO Automatically detected platform cuda.", flush=True)
print("INFO Model loading took 8.01 GiB memory and 1.5 seconds", flush=True)
if os.environ.get("FAKE_VLLM_NEVER_READY") == "1":
    time.sleep(3600)
print("INFO GPU KV cache size: 867,999 tokens", flush=True)
print("INFO Maximum concurrency for 8,192 tokens per request: 105.96x", flush=True)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def _executable(path: Path, body: str) -> Path:
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_vllm_command(tmp_path: Path) -> list[str]:
    """``python fake_vllm.py``: run through the interpreter so /proc's cmdline equals the recorded argv."""
    return [sys.executable, str(tmp_path / "bin" / "fake_vllm.py")]


def scripted_host(tmp_path: Path, gpu: str = "t4", meminfo: str | None = None) -> tuple[DoctorSources, str]:
    """A host with one T4 or L4 and a healthy vLLM 0.29 install; returns (sources, target python)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    probe = (HOST_DATA / "probe_healthy_t4.txt").read_text()
    if gpu == "t4":
        smi = (HOST_DATA / "nvidia_smi_t4.csv").read_text()
    else:
        smi = (HOST_DATA / "nvidia_smi_4xl4.csv").read_text().splitlines()[0] + "\n"
        probe = probe.replace('"Tesla T4"', '"NVIDIA L4"').replace('"capability": [7, 5]', '"capability": [8, 9]')
        probe = probe.replace('"sm_86", "sm_90"', '"sm_86", "sm_89", "sm_90"')
    (bin_dir / "smi.csv").write_text(smi)
    (bin_dir / "probe.txt").write_text(probe)
    _executable(bin_dir / "nvidia-smi", f"#!/bin/sh\ncat '{bin_dir / 'smi.csv'}'\n")
    python = _executable(bin_dir / "python-vllm", f"#!/bin/sh\ncat '{bin_dir / 'probe.txt'}'\n")
    (bin_dir / "fake_vllm.py").write_text(FAKE_VLLM)
    text = meminfo if meminfo is not None else ROOMY_MEMINFO
    sources = DoctorSources(
        read_meminfo=lambda: text,
        which=lambda name: str(bin_dir / name) if (bin_dir / name).exists() else None,
        env={},
        home=tmp_path,
    )
    return sources, str(python)
