"""The shared plumbing: error text, confirmation refusals, progress relayed from a worker thread,
and cancellation that lets the worker clean up before the request ends."""

from __future__ import annotations

import threading
import time
from typing import Annotated

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult

from gemmaserve.errors import ConfirmationRequired, GemmaserveError, ServerNotRunning
from gemmaserve.mcp_server.framework import (
    Confirm,
    ToolSet,
    format_error,
    relay,
    require_confirmation,
    run_blocking,
    translate_errors,
    typed_result,
)
from gemmaserve.progress import Cancelled, CancelToken, ProgressCallback, ProgressEvent
from gemmaserve.request_model import READS, ActionRequest
from gemmaserve.result_model import ActionResult
from gemmaserve.views import view
from gemmaserve.views.page import Page, page
from tests.support.mcp.fixtures import (
    ProgressLog,
    call_tool,
    error_details,
    error_text,
    list_tools,
)


class Counted(ActionResult):
    steps: int


@view(Counted)
def _counted_page(result: Counted) -> Page:
    return page(f"{result.steps} steps")


def _toy_server(cleaned_up: threading.Event, started: threading.Event) -> MCPServer:
    server: MCPServer = MCPServer("toy")

    @server.tool()
    @translate_errors
    async def count(steps: int, ctx: Context) -> Annotated[CallToolResult, Counted]:
        def work(*, progress: ProgressCallback, cancel: CancelToken) -> Counted:
            for step in range(1, steps + 1):
                progress(ProgressEvent("count", f"step {step}", done=step, total=steps))
            return Counted(steps=steps)

        return typed_result(await run_blocking(ctx, work))

    @server.tool()
    @translate_errors
    async def wait_forever(ctx: Context) -> Annotated[CallToolResult, Counted]:
        def work(*, progress: ProgressCallback, cancel: CancelToken) -> Counted:
            started.set()
            try:
                while True:
                    cancel.sleep(0.01)
            except Cancelled:
                time.sleep(0.2)  # cleanup that takes a while must still finish
                cleaned_up.set()
                raise

        return typed_result(await run_blocking(ctx, work))

    @server.tool()
    @translate_errors
    def fails() -> str:
        raise ServerNotRunning("No vLLM server is running.", hint="gemmaserve serve start", pid_file="/x")

    @server.tool()
    @translate_errors
    def crashes() -> str:
        raise RuntimeError("secret internals")

    @server.tool()
    @translate_errors
    def delete_it(confirm: Confirm) -> str:
        require_confirmation(confirm, "delete it")
        return "deleted"

    return server


def test_progress_from_a_worker_thread_reaches_the_client() -> None:
    server = _toy_server(threading.Event(), threading.Event())
    progress = ProgressLog()
    result = call_tool(server, "count", {"steps": 3}, progress=progress)
    assert result.structured_content == {"steps": 3, "ok": True}
    assert result.content[0].text == "3 steps"  # type: ignore[union-attr]
    assert progress.updates == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


def test_cancelled_request_lets_the_worker_clean_up() -> None:
    cleaned_up, started = threading.Event(), threading.Event()
    server = _toy_server(cleaned_up, started)

    async def go() -> None:
        async with Client(server) as client:
            with anyio.move_on_after(5) as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "wait_forever", {})
                    while not started.is_set():
                        await anyio.sleep(0.01)
                    group.cancel_scope.cancel()
            assert not scope.cancelled_caught

    anyio.run(go)
    # The request ends only after the cleanup: nothing is left running behind the cancellation.
    assert cleaned_up.is_set(), "the cancellation returned before the worker cleaned up"


def test_gemmaserve_error_becomes_error_result_with_message_fix_and_fields() -> None:
    result = call_tool(_toy_server(threading.Event(), threading.Event()), "fails", {})
    text = error_text(result)
    assert "No vLLM server is running." in text
    assert "Fix: gemmaserve serve start" in text
    assert error_details(result) == {
        "error": "ServerNotRunning",
        "message": "No vLLM server is running.",
        "hint": "gemmaserve serve start",
        "pid_file": "/x",
    }


def test_unexpected_exception_is_masked() -> None:
    text = error_text(call_tool(_toy_server(threading.Event(), threading.Event()), "crashes", {}))
    assert "secret internals" not in text
    assert "Error executing tool crashes" in text


def test_confirmation_is_required_and_checked() -> None:
    server = _toy_server(threading.Event(), threading.Event())
    schema = next(tool for tool in list_tools(server) if tool.name == "delete_it").input_schema
    assert schema["required"] == ["confirm"]
    refused = call_tool(server, "delete_it", {"confirm": False})
    assert error_details(refused)["error"] == "ConfirmationRequired"
    assert "confirm=true" in error_text(refused)
    missing = call_tool(server, "delete_it", {})
    assert "validation error" in error_text(missing)
    assert call_tool(server, "delete_it", {"confirm": True}).content[0].text == "deleted"  # type: ignore[union-attr]


def test_format_error_without_hint() -> None:
    text = format_error(GemmaserveError("Plain failure."))
    assert text.splitlines()[0] == "Plain failure."
    assert not any(line.startswith("Fix:") for line in text.splitlines())


def test_require_confirmation_raises_usage_error() -> None:
    try:
        require_confirmation(False, "revert the clamp")
    except ConfirmationRequired as exc:
        assert exc.exit_code == 2
        assert exc.fields["action"] == "revert the clamp"
    else:
        raise AssertionError("no refusal")


def test_relay_passes_counted_work_and_numbers_the_rest() -> None:
    """The library's events as MCP progress; a cleanup's events after a cancellation are relayed like any other
    (cancellation is the token's job now: a progress call never raises, so it cannot cut a teardown short)."""
    reported: list[tuple[float, float | None, str | None]] = []
    cancellation = CancelToken()
    progress = relay(lambda done, total, message: reported.append((done, total, message)))
    progress(ProgressEvent("create", "created model", done=1, total=3))
    cancellation.cancel()
    try:
        raise RuntimeError("capacity")  # the library is tearing down after its own failure
    except RuntimeError:
        progress(ProgressEvent("teardown", "deleting model"))  # must not raise: the teardown has to finish
    progress(ProgressEvent("teardown", "deleting what was created"))  # nor after the cancellation
    assert reported == [(1, 3, "created model"), (2, None, "deleting model"), (3, None, "deleting what was created")]


class CountRequest(ActionRequest, action="count", effect=READS):
    more: int = 0


def _counting_tools(start: int, title: str = "Count") -> ToolSet:
    """A tool set whose one tool adds ``more`` to ``start``: each build closes over its own start, as each
    ``build_server`` closes over its own deps."""
    tools = ToolSet()

    @tools.action(CountRequest, title=title, result=Counted)
    def count(request: CountRequest) -> CallToolResult:
        return typed_result(Counted(steps=start + request.more))

    return tools


def test_each_build_calls_its_own_body_while_the_schema_is_made_once() -> None:
    first, second = _counting_tools(1), _counting_tools(100)
    (one,), (other,) = first.tools, second.tools
    assert one.fn_metadata is other.fn_metadata and one.parameters is other.parameters
    assert one.fn is not other.fn
    for tools, expected in ((first, 3), (second, 102)):
        result = call_tool(MCPServer("toy", tools=tools.tools), "count", {"more": 2})
        assert not result.is_error and result.structured_content["steps"] == expected
    (retitled,) = _counting_tools(1, title="Count again").tools
    assert retitled.title == "Count again" and retitled.fn_metadata is not one.fn_metadata


def test_work_in_flight_is_named_by_its_tool_and_ends_with_its_result_summary() -> None:
    """A server that stops with work in flight says which tool each was and what it produced (a server started,
    a file written): nobody else will hear of a call whose client went away."""
    from gemmaserve.mcp_server.framework import IN_FLIGHT, Work

    seen: list[Work] = []
    tools = ToolSet()

    @tools.action(CountRequest, title="Count", result=Counted)
    async def count(request: CountRequest, ctx: Context) -> CallToolResult:
        def work(*, progress: ProgressCallback, cancel: CancelToken) -> Counted:
            seen.extend(IN_FLIGHT.running())
            return Counted(steps=request.more)

        return typed_result(await run_blocking(ctx, work))

    result = call_tool(MCPServer("toy", tools=tools.tools), "count", {"more": 4})
    assert not result.is_error
    (work,) = seen
    assert (work.label, work.ending) == ("count", "4 steps")


def test_abandoned_work_names_where_to_look_for_what_it_left(capsys: pytest.CaptureFixture[str]) -> None:
    from gemmaserve.mcp_server.framework import Work
    from gemmaserve.mcp_server.stdio import abandon

    abandon([Work("serve_start"), Work("sagemaker_deploy e2b"), Work("sagemaker_wait x")], "SIGTERM")
    said = capsys.readouterr().err
    assert said.endswith(
        "serve_start; sagemaker_deploy e2b; sagemaker_wait x. "
        "Check with: gemmaserve serve status --all and gemmaserve sagemaker list\n"
    )
    abandon([Work("checkpoint_repack")], "SIGINT")
    assert capsys.readouterr().err.endswith("leaving resources behind: checkpoint_repack.\n")
