"""``server_status``, ``stop_server``, ``read_logs``: the life of a server after start.

Status reads the process (through the record's pid + start-time identity), ``/health``
and the engine log. Stop signals the process group only after checking the pid is
still the process gemmaserve started, escalates SIGTERM → SIGKILL, and returns once the
whole group is gone (vLLM's engine core and workers, and multiprocessing's resource
tracker, which ignores SIGTERM and exits only after the others).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from pydantic import Field

from gemmaserve.engine_log import EngineFacts, EngineStage, parse_engine_log
from gemmaserve.errors import ServerNotRunning
from gemmaserve.host.runner import CommandRunner, run_command
from gemmaserve.result_model import ActionResult
from gemmaserve.serve import records
from gemmaserve.serve.probes import DEFAULT_PORT, LAST_LINES, HealthProbe, http_health, tail_lines
from gemmaserve.serve.records import ServerRecord

STOP_TIMEOUT_S = 30.0


class ServerState(StrEnum):
    STARTING = "starting"
    LOADING = "loading"
    COMPILING = "compiling"
    SERVING = "serving"
    DEAD = "dead"


class ServerStatus(ActionResult):
    """``ok`` (computed): the server is not dead (``serve status`` exits 1 when it is)."""

    port: int
    state: ServerState
    pid: int
    alive: bool
    healthy: bool
    model: str
    served_model_name: str
    log_path: str
    uptime_s: float
    engine: EngineFacts
    last_lines: list[str]
    oom_hint: str | None = None

    def succeeded(self) -> bool:
        return self.state is not ServerState.DEAD


class StopResult(ActionResult):
    port: int
    pid: int
    was_running: bool
    signal_sent: str | None  # "SIGTERM", "SIGKILL", or None when nothing was signalled
    waited_s: float
    note: str
    # pids of the server's process group still alive on return
    processes_left: list[int] = Field(default_factory=list)

    @classmethod
    def not_signalled(cls, port: int, pid: int, note: str) -> StopResult:
        """The recorded server was not running and nothing was left to signal."""
        return cls(port=port, pid=pid, was_running=False, signal_sent=None, waited_s=0.0, note=note)


class ServerList(ActionResult):
    """Every server gemmaserve started on this host (``serve status --all``)."""

    servers: list[ServerStatus]


class ServeLogs(ActionResult):
    """The last lines of the engine log (the CLI prints the lines themselves)."""

    port: int
    lines: list[str]


def _require_record(port: int) -> ServerRecord:
    record = records.load_record(port)
    if record is None:
        raise ServerNotRunning(
            f"No server started by gemmaserve on port {port}.",
            hint="gemmaserve serve start --model … (or pass the --port it was started on)",
            port=port,
        )
    return record


def oom_kill_hint(pid: int, runner: CommandRunner = run_command) -> str:
    """What the kernel log says about an OOM kill of ``pid`` (or why it could not be read)."""
    failures = []
    for argv in (
        ["dmesg", "--ctime"],
        ["journalctl", "-k", "--no-pager", "-n", "2000"],
    ):
        try:
            result = runner(argv, 10.0)
        except (FileNotFoundError, OSError) as exc:
            failures.append(f"{argv[0]}: {exc}")
            continue
        if result.returncode != 0 or not result.stdout.strip():
            failures.append(f"{argv[0]}: {(result.stderr or 'no output').strip().splitlines()[-1:] or ''}")
            continue
        kills = [
            line
            for line in result.stdout.splitlines()
            if re.search(rf"(Out of memory|oom-kill|Killed process).*\b{pid}\b", line)
        ]
        if kills:
            return (
                f"The kernel's OOM killer stopped it: {kills[-1].strip()} — add swap (gemmaserve doctor names the size)"
            )
        any_oom = [line for line in result.stdout.splitlines() if "Out of memory: Killed process" in line]
        if any_oom:
            return f"No OOM kill of pid {pid}, but the kernel killed others: {any_oom[-1].strip()}"
        return f"No OOM kill of pid {pid} in the kernel log ({argv[0]})."
    return "Could not check for an OOM kill: the kernel log is not readable (" + "; ".join(failures) + ")."


def server_state(*, alive: bool, healthy: bool, stage: EngineStage) -> ServerState:
    """The state status reports (pure): only ``/health`` makes a server serving.

    A log that already says the HTTP server is up while ``/health`` has not answered yet (a
    busy host, the socket not bound yet) stays at ``compiling``, the last start-up stage, so a
    server polled while it starts never appears to go backwards.
    """
    if not alive:
        return ServerState.DEAD
    if healthy:
        return ServerState.SERVING
    if stage in (EngineStage.COMPILING, EngineStage.SERVING):
        return ServerState.COMPILING
    if stage is EngineStage.LOADING:
        return ServerState.LOADING
    return ServerState.STARTING


def server_status(
    port: int = DEFAULT_PORT,
    *,
    health: HealthProbe = http_health,
    runner: CommandRunner = run_command,
    clock: Callable[[], float] = time.time,
    last_lines: int = LAST_LINES,
) -> ServerStatus:
    """compiling / loading / serving / dead, with the engine facts from the log.

    Raises:
        ServerNotRunning: gemmaserve started no server on ``port``.
    """
    record = _require_record(port)
    alive = records.process_matches(record)
    lines = tail_lines(Path(record.log_path), 5000)
    facts = parse_engine_log(lines)
    healthy = alive and health(port)
    state = server_state(alive=alive, healthy=healthy, stage=facts.stage)
    return ServerStatus(
        port=port,
        state=state,
        pid=record.pid,
        alive=alive,
        healthy=healthy,
        model=record.model,
        served_model_name=record.served_model_name,
        log_path=record.log_path,
        uptime_s=max(0.0, clock() - record.started_at),
        engine=facts,
        last_lines=lines[-last_lines:] if last_lines > 0 else [],
        oom_hint=oom_kill_hint(record.pid, runner) if not alive else None,
    )


def list_statuses(*, health: HealthProbe = http_health, runner: CommandRunner = run_command) -> list[ServerStatus]:
    return [server_status(record.port, health=health, runner=runner, last_lines=0) for record in records.list_records()]


def _wait_group_gone(
    pgid: int,
    timeout_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> list[int]:
    deadline = clock() + timeout_s
    while (left := records.group_members(pgid)) and clock() < deadline:
        sleep(0.05)
    return left


def _signal_group(kill_group: Callable[[int, int], None], pgid: int, signum: int) -> None:
    try:
        kill_group(pgid, signum)
    except ProcessLookupError:  # the group emptied in between
        pass


def _wait_gone(
    record: ServerRecord,
    timeout_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> bool:
    deadline = clock() + timeout_s
    while clock() < deadline:
        if not records.process_matches(record):
            return True
        sleep(0.05)
    return not records.process_matches(record)


def stop_server(
    port: int = DEFAULT_PORT,
    *,
    timeout_s: float = STOP_TIMEOUT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    kill_group: Callable[[int, int], None] = os.killpg,
) -> StopResult:
    """SIGTERM the server's process group, wait ``timeout_s``, then SIGKILL.

    A pid whose start time or command line no longer match the record is some other
    process (pid reuse): it is never signalled, and the stale record is removed.

    Raises:
        ServerNotRunning: gemmaserve started no server on ``port``.
    """
    record = _require_record(port)
    started = clock()
    if not records.process_matches(record):
        records.remove_record(port)
        reused = records.process_running(record.pid)
        if reused:
            return StopResult.not_signalled(
                port,
                record.pid,
                f"pid {record.pid} is now a different process (start time or command line differ): not signalled",
            )
        # The server exited; children it left in its group (an engine core holding GPU memory) are ours.
        orphans = records.group_members(record.pid)
        if not orphans:
            return StopResult.not_signalled(port, record.pid, f"pid {record.pid} had already exited")
        _signal_group(kill_group, record.pid, signal.SIGKILL)
        return StopResult(
            port=port,
            pid=record.pid,
            was_running=False,
            signal_sent="SIGKILL",
            waited_s=clock() - started,
            note=f"pid {record.pid} had already exited; SIGKILL to {len(orphans)} process(es) it left: {orphans}",
            processes_left=_wait_group_gone(record.pid, 10.0, clock, sleep),
        )
    _signal_group(kill_group, record.pid, signal.SIGTERM)
    sent = "SIGTERM"
    if not _wait_gone(record, timeout_s, clock, sleep):
        _signal_group(kill_group, record.pid, signal.SIGKILL)
        sent = "SIGKILL"
        _wait_gone(record, 10.0, clock, sleep)
    gone = not records.process_matches(record)
    left: list[int] = []
    if gone:
        left = _wait_group_gone(record.pid, max(0.0, timeout_s - (clock() - started)), clock, sleep)
        if left:
            _signal_group(kill_group, record.pid, signal.SIGKILL)
            sent = "SIGKILL"
            left = _wait_group_gone(record.pid, 10.0, clock, sleep)
        records.remove_record(port)
    waited = clock() - started
    if not gone:
        note = f"pid {record.pid} survived {sent}"
    elif left:
        note = f"stopped after {sent} in {waited:.1f} s, but {len(left)} process(es) of its group survived: {left}"
    else:
        note = f"stopped after {sent} in {waited:.1f} s, no process of its group left"
    return StopResult(
        port=port,
        pid=record.pid,
        was_running=True,
        signal_sent=sent,
        waited_s=waited,
        note=note,
        processes_left=left,
    )


def read_logs(port: int = DEFAULT_PORT, lines: int = 100) -> list[str]:
    """The last ``lines`` lines of the server's engine log.

    Raises:
        ServerNotRunning: no record and no log for ``port``.
    """
    record = records.load_record(port)
    path = Path(record.log_path) if record else records.serve_root() / str(port) / records.LOG_NAME
    if not path.exists():
        raise ServerNotRunning(
            f"No engine log for port {port}.",
            hint="gemmaserve serve start first",
            port=port,
        )
    return tail_lines(path, lines)


def log_path_for(port: int) -> Path:
    record = records.load_record(port)
    return Path(record.log_path) if record else records.serve_root() / str(port) / records.LOG_NAME
