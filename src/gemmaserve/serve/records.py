"""What gemmaserve knows about a server it started: the JSON record, the process, the locks.

A record lives in ``state_dir()/serve/<port>/server.json`` (written atomically)
next to the engine log. A pid alone is not an identity (pids are reused), so a
record also keeps the process start time (``/proc/PID/stat`` field 22, in clock
ticks since boot) and the argv, and ``process_matches`` checks both.
Locks are ``flock``s on one file per GPU and per port, inherited by the server
process so they are held exactly as long as it lives.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gemmaserve.errors import ServerAlreadyRunning
from gemmaserve.fileio import write_atomic
from gemmaserve.state import state_dir

RECORD_NAME = "server.json"
LOG_NAME = "engine.log"


class ServerRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    port: int
    gpu_index: int
    pid: int
    start_ticks: int
    argv: list[str]
    log_path: str
    started_at: float  # wall-clock seconds since the epoch
    model: str
    served_model_name: str


def serve_root() -> Path:
    root = state_dir() / "serve"
    root.mkdir(parents=True, exist_ok=True)
    return root


def server_dir(port: int) -> Path:
    path = serve_root() / str(port)
    path.mkdir(parents=True, exist_ok=True)
    return path


def record_path(port: int) -> Path:
    return server_dir(port) / RECORD_NAME


def save_record(record: ServerRecord) -> None:
    write_atomic(record_path(record.port), record.model_dump_json(indent=2) + "\n")


def load_record(port: int) -> ServerRecord | None:
    path = serve_root() / str(port) / RECORD_NAME
    try:
        return ServerRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def remove_record(port: int) -> None:
    (serve_root() / str(port) / RECORD_NAME).unlink(missing_ok=True)


def list_records() -> list[ServerRecord]:
    records = []
    for child in sorted(serve_root().iterdir()):
        if child.name.isdigit() and (record := load_record(int(child.name))):
            records.append(record)
    return records


# --- the process ---------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm (field 2) may hold spaces and parentheses; everything after the last ")" is fixed.
    return text[text.rindex(")") + 2 :].split()


def process_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: start time in clock ticks after boot (None: no such process)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None  # fields[0] is field 3 (state)


def process_running(pid: int) -> bool:
    """True for a live process; a zombie (exited, not yet reaped) counts as gone."""
    fields = _stat_fields(pid)
    return fields is not None and bool(fields) and fields[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Live pids whose process group is ``pgid`` (field 5 of /proc/PID/stat).

    The kernel never hands out a pid that is still some group's id, so while members
    exist they are the children of the process that created the group.
    """
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return sorted(members)


def process_cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def process_matches(record: ServerRecord) -> bool:
    """Whether ``record.pid`` is still the process gemmaserve started (start time and argv agree)."""
    if not process_running(record.pid):
        return False
    # A script started through its shebang (the `vllm` console script) shows in /proc as
    # [interpreter, script, args…]: the recorded argv is then the tail of the command line.
    cmdline = process_cmdline(record.pid) or []
    return process_start_ticks(record.pid) == record.start_ticks and cmdline[-len(record.argv) :] == record.argv


def wait_until_identifiable(record: ServerRecord, *, timeout_s: float = 2.0, poll_s: float = 0.01) -> bool:
    """Wait until ``record`` matches its process, or the process is gone.

    Right after ``execve`` of a script the kernel can still show the parent's command line for a
    moment; a status or stop in that window would take our own server for a stranger.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process_matches(record):
            return True
        if not process_running(record.pid):
            return False
        time.sleep(poll_s)
    return process_matches(record)


# --- locks -----------------------------------------------------------------------


def lock_path(kind: str, key: int) -> Path:
    locks = serve_root() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    return locks / f"{kind}-{key}.lock"


def acquire_lock(kind: str, key: int) -> int:
    """An fd holding an exclusive flock on the ``kind``/``key`` lock; raises ServerAlreadyRunning."""
    path = lock_path(kind, key)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = path.read_text().strip() or "another process"
        raise ServerAlreadyRunning(
            f"{kind} {key} is in use by a server gemmaserve started ({holder}).",
            hint=f"gemmaserve serve status; stop it with gemmaserve serve stop --port <port> (lock {path})",
            kind=kind,
            key=key,
        ) from None
    return fd


def note_lock_holder(fd: int, holder: Mapping[str, object]) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder).encode(), 0)
