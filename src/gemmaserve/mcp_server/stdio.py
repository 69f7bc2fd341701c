"""``gemmaserve mcp`` on stdio, and how it ends: every tool call in flight is stopped and cleaned up first.

An agent host ends a session by closing the server's stdin, and often follows with SIGTERM; a
supervisor or a closed terminal sends SIGTERM or SIGHUP. Either way a deploy may be waiting for
its endpoint with money already running, so before the process exits it cancels every tool call in
:data:`~gemmaserve.mcp_server.framework.IN_FLIGHT` (the same cancellation an MCP client's request
sends: the deploy deletes what it created), waits for each, and writes how each ended to stderr
(stdout belongs to the protocol, and its reader may be gone).

A second stop signal while that runs is reported and ignored; a third abandons the cleanup and
exits at once, naming what was still running. SIGHUP is left alone when the process started with
it ignored (``nohup``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

from gemmaserve.mcp_server.framework import IN_FLIGHT, Work
from gemmaserve.redact import redact
from gemmaserve.sagemaker.operations.teardown import live_stop_signals

# After the cleanup, how long the protocol's own shutdown may take before the process exits anyway
# (its stdin reader can be blocked on a client that never closes the pipe).
EXIT_GRACE_S = 2.0
# Abandoning the cleanup takes this many stop signals (the first starts it, the next is only reported).
SIGNALS_TO_ABANDON = 3


def say(line: str) -> None:
    """One line on stderr, never failing (the terminal may be gone after SIGHUP)."""
    try:
        print(f"gemmaserve mcp: {redact(line)}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


async def stop_all_work(reason: str) -> None:
    """Cancel every tool call in flight, wait for each to clean up, and say how each ended."""
    works = IN_FLIGHT.stop_all()
    if not works:
        return
    say(f"{reason}: stopping {len(works)} running tool call{'s' if len(works) > 1 else ''} and cleaning up first.")
    with anyio.CancelScope(shield=True):
        for work in works:
            await anyio.to_thread.run_sync(work.finished.wait)
            say(f"{work.label}: {work.ending}")


# Where what an abandoned tool call may leave behind is listed, by the tool's command group.
LEFT_BEHIND_CHECKS = {"sagemaker": "gemmaserve sagemaker list", "serve": "gemmaserve serve status --all"}


def abandon(works: list[Work], signal_name: str) -> None:
    groups = dict.fromkeys(work.label.split("_", 1)[0] for work in works)
    checks = [LEFT_BEHIND_CHECKS[group] for group in groups if group in LEFT_BEHIND_CHECKS]
    say(
        f"Cleanup abandoned ({signal_name}). Still running, and maybe leaving resources behind: "
        + "; ".join(work.label for work in works)
        + (f". Check with: {' and '.join(checks)}" if checks else ".")
    )


@dataclass
class Ending:
    """How the session ended: 0 when the client closed it, 128 + the number of the signal that stopped it."""

    code: int = 0


class UntilSessionEnds:
    """The session's read stream; when it ends (the client closed stdin), every tool call is stopped first."""

    def __init__(self, inner: Any, on_end: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._on_end = on_end

    def __getattr__(self, name: str) -> Any:  # last_context and anything else the SDK reads
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            await self._on_end()
            raise

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _watch_signals(signals: tuple[signal.Signals, ...], ending: Ending, stop: anyio.CancelScope) -> None:
    received = 0
    with anyio.open_signal_receiver(*signals) as arrivals:
        async with anyio.create_task_group() as group:
            async for number in arrivals:
                name = signal.Signals(number).name
                received += 1
                if received == 1:
                    ending.code = 128 + number

                    async def stop_then_exit(name: str = name) -> None:
                        await stop_all_work(f"{name} received")
                        _exit_soon(ending.code)
                        stop.cancel()

                    group.start_soon(stop_then_exit)
                elif received < SIGNALS_TO_ABANDON:
                    say(
                        f"{name} received: the cleanup continues so nothing is left billing; send it once more to abandon."
                    )
                else:
                    abandon(IN_FLIGHT.running(), name)
                    os._exit(ending.code)


def _exit_soon(code: int) -> None:
    """Exit with ``code`` if the normal shutdown has not ended the process within :data:`EXIT_GRACE_S`."""

    def force() -> None:
        sys.stderr.flush()
        os._exit(code)

    timer = threading.Timer(EXIT_GRACE_S, force)
    timer.daemon = True
    timer.start()


async def _serve(server: MCPServer, signals: tuple[signal.Signals, ...], ending: Ending) -> None:
    async def session_closed() -> None:
        await stop_all_work("The client closed the session")

    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async does the same with its streams
    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as group:
        group.start_soon(_watch_signals, signals, ending, group.cancel_scope)
        await lowlevel.run(
            UntilSessionEnds(read_stream, session_closed), write_stream, lowlevel.create_initialization_options()
        )
        group.cancel_scope.cancel()


def serve(server: MCPServer) -> int:
    """Serve ``server`` on stdio until the session ends or a stop signal; returns the exit code.

    0 when the client closed the session; 128 + the signal's number when a signal stopped it.
    """
    ending = Ending()
    anyio.run(_serve, server, tuple(signal.Signals(number) for number in live_stop_signals()), ending)
    return ending.code
