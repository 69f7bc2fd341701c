"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Every write of something a user asked to keep (patched vLLM files, benchmark
results, repacked shards, manifests) goes through here.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename.

    The temporary file is fsynced before the rename so a crash cannot leave an
    empty file under the final name. ``mode`` defaults to the existing file's
    permissions (or 0o644 for a new file).
    """
    target = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
