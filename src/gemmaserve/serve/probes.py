"""How a server on this host is looked at from outside: its default port, ``/health``, the tail of its log.

Shared by the launcher (waiting for a start) and the supervisor (status, stop, logs), below both.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

DEFAULT_PORT = 8000
READY_TIMEOUT_S = 1800.0  # a first start on a T4 compiles kernels and loads weights through swap
HEALTH_TIMEOUT_S = 2.0
LAST_LINES = 20

HealthProbe = Callable[[int], bool]


def http_health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=HEALTH_TIMEOUT_S) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def tail_lines(path: Path, count: int, *, start: int = 0) -> list[str]:
    """The last ``count`` lines of ``path`` (of its last 256 KiB), none before byte ``start``."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(start, size - 256 * 1024))
            data = handle.read().decode(errors="replace")
    except FileNotFoundError:
        return []
    return data.splitlines()[-count:] if count > 0 else []
