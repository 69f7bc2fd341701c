"""Plumbing every MCP tool shares: errors as ``ToolError``, typed results, confirmation, progress, cancellation.

A tool body calls one library function and hands its pydantic result to
:func:`typed_result`; expected failures (:class:`GemmaserveError`) become a
``ToolError`` whose text carries the message, the fix and the error's fields as
JSON. Nothing here prints: on stdio, stdout belongs to the protocol.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Annotated, Any, ParamSpec, Protocol, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gemmaserve.errors import ConfirmationRequired, GemmaserveError
from gemmaserve.progress import Cancelled, CancelToken, ProgressCallback, ProgressEvent
from gemmaserve.redact import redact, redact_data
from gemmaserve.request_model import ActionRequest, Effect, mcp_fields
from gemmaserve.result_model import ActionResult

P = ParamSpec("P")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

# The tool whose call is running in this task: what :func:`run_blocking` names its work after by default.
_CALLING: ContextVar[str] = ContextVar("gemmaserve_mcp_calling", default="a tool call")

Confirm = Annotated[
    bool,
    Field(
        description="Must be true, and only after the user has agreed to this change: the tool refuses "
        "otherwise (false is fine together with dry_run=true)."
    ),
]


def format_error(exc: GemmaserveError) -> str:
    """The text an agent reads: what failed, the fix, and the error's fields as JSON."""
    lines = [exc.message]
    if exc.hint:
        lines.append(f"Fix: {exc.hint}")
    lines.append("Details: " + json.dumps(exc.to_dict(), default=str, sort_keys=True, ensure_ascii=False))
    return "\n".join(lines)


def tool_error(exc: GemmaserveError) -> ToolError:
    return ToolError(format_error(exc))


def os_error(exc: OSError) -> ToolError:
    """A file-system failure on a path the caller named (its text names the path, never internals)."""
    message = f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)
    details = {"error": type(exc).__name__, "message": message, "errno": exc.errno, "path": exc.filename}
    return ToolError(
        "\n".join(
            [
                message,
                "Fix: Check that the path exists, is the right kind (file or directory) and is writable.",
                "Details: " + json.dumps(details, default=str, sort_keys=True),
            ]
        )
    )


def translate_errors(fn: Callable[P, T]) -> Callable[P, T]:
    """Turn a :class:`GemmaserveError` raised by ``fn`` into a ``ToolError`` (sync or async ``fn``).

    An ``OSError`` (a path the caller named is missing or not writable) is reported the same way.
    Any other exception is a bug: the SDK masks its text from the client and logs its traceback.
    """
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except GemmaserveError as exc:
                raise tool_error(exc) from exc
            except OSError as exc:
                raise os_error(exc) from exc
            except Cancelled as exc:  # stopped by the server itself (the client did not cancel): say what was done
                raise ToolError(str(exc)) from exc

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except GemmaserveError as exc:
            raise tool_error(exc) from exc
        except OSError as exc:
            raise os_error(exc) from exc
        except Cancelled as exc:
            raise ToolError(str(exc)) from exc

    return wrapper


def typed_result(result: ActionResult) -> CallToolResult:
    """The structured content is exactly what the CLI's ``--json`` prints; the text is the result's view
    (:func:`gemmaserve.views.summary_for`), the same words the CLI prints."""
    from gemmaserve.views import summary_for

    return CallToolResult(
        content=[TextContent(type="text", text=summary_for(result))],
        structured_content=result.model_dump(mode="json"),
    )


def require_confirmation(confirm: bool, action: str, *, has_dry_run: bool = True) -> None:
    """Refuse a destructive ``action`` unless the caller passed ``confirm=true``."""
    if confirm is not True:
        preview = " (or dry_run=true to see what would happen)" if has_dry_run else ""
        raise ConfirmationRequired(
            f"Refused to {action}: this changes or deletes something and confirm was not true.",
            hint=f"Ask the user, then call again with confirm=true{preview}.",
            action=action,
        )


ProgressSink = Callable[[float, float | None, str | None], None]


class BlockingWork(Protocol[T_co]):
    """A library call as a tool runs it: with the call's progress and cancellation, as every action takes them."""

    def __call__(self, *, progress: ProgressCallback, cancel: CancelToken) -> T_co: ...


class RedactReplies:
    """Server middleware: every tool call's reply, result or error, leaves through :func:`redact_data`.

    One place for all tools: a secret in an error's text, a quoted container log line, echoed bad input
    or structured content is hidden however the tool produced it. The reply is serialised exactly as the
    SDK's runner does (by alias, JSON mode, no nulls), then redacted.
    """

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        try:
            result = await call_next(ctx)
        except MCPError as error:
            error.error.message = redact(error.error.message)
            error.error.data = redact_data(error.error.data)
            raise
        if ctx.method != "tools/call" or result is None:
            return result
        if isinstance(result, BaseModel):
            result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return redact_data(result)


def relay(report: ProgressSink) -> ProgressCallback:
    """The library's :class:`ProgressEvent` as MCP progress: counted work as is, else a running count.

    The message is redacted: progress leaves the process as replies do (:class:`RedactReplies`).
    """
    count = 0

    def progress(event: ProgressEvent) -> None:
        nonlocal count
        count += 1
        message = redact(event.message) if event.message else event.message
        report(event.done if event.done is not None else count, event.total, message)

    return progress


@dataclasses.dataclass
class Work:
    """One tool call running in a worker thread: what it is, how to stop it, and how it ended."""

    label: str
    cancel: CancelToken = dataclasses.field(default_factory=CancelToken)
    finished: threading.Event = dataclasses.field(default_factory=threading.Event)
    ending: str = "still running"


class ServerStopping(GemmaserveError):
    """A tool call that arrived after the server began to stop."""


class WorkInFlight:
    """Every tool call running in a worker thread, so the server can stop them all before it exits.

    A deploy in flight when the session ends or the process is told to stop must tear down what it
    created: :meth:`stop_all` cancels each (the same :class:`CancelToken` an MCP cancellation sets),
    and the caller waits on ``finished`` and reports ``ending``. Process-wide, as signals and stdio are.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._works: list[Work] = []
        self.stopping = False

    def start(self, label: str) -> Work:
        with self._lock:
            if self.stopping:
                raise ServerStopping(
                    f"Refused to start {label}: the server is stopping.", hint="Start gemmaserve mcp again."
                )
            work = Work(label)
            self._works.append(work)
            return work

    def finish(self, work: Work, ending: str) -> None:
        work.ending = ending
        with self._lock:
            if work in self._works:
                self._works.remove(work)
        work.finished.set()

    def stop_all(self) -> list[Work]:
        """Refuse new work, cancel what runs, and return it (wait on each ``finished``)."""
        with self._lock:
            self.stopping = True
            works = list(self._works)
        for work in works:
            work.cancel.cancel()
        return works

    def running(self) -> list[Work]:
        with self._lock:
            return list(self._works)


IN_FLIGHT = WorkInFlight()


def _described(describe: Callable[[Any], str], value: Any) -> str:
    # Raising here would skip the wake-up of whoever waits for this work (a server stopping waits for good).
    try:
        return describe(value)
    except Exception as error:
        return f"finished ({type(value).__name__}; its summary failed: {error})"


def _ending(error: BaseException | None) -> str:
    if error is None:
        return "finished"
    message = error.message if isinstance(error, GemmaserveError) else str(error)
    return message or type(error).__name__


async def run_blocking(
    ctx: Context,
    work: BlockingWork[T],
    *,
    label: str | None = None,
    describe: Callable[[T], str] | None = None,
) -> T:
    """Run sync ``work`` in a thread, its progress relayed to the client; on cancellation let it clean up first.

    ``work`` is called as the library's actions are, ``work(progress=…, cancel=…)``, so a tool passes
    ``functools.partial(action, request)`` where it needs nothing more.

    When the request is cancelled the :class:`~gemmaserve.progress.CancelToken` is set and this waits (shielded) for
    ``work`` to return or raise, so a deploy's teardown finishes before the cancellation propagates. The work is
    registered in :data:`IN_FLIGHT` under ``label`` (default: the tool's name), so a server that stops (its
    session closed, a stop signal) cancels it and waits for it the same way; ``describe`` (default: the result's
    MCP summary) says what a call that finished anyway produced (a deploy that reached InService, a server
    started, as the session closed: nobody else will hear of it).
    """
    from gemmaserve.views import summary_for

    describe_result: Callable[[Any], str] = describe or summary_for
    token = anyio.lowlevel.current_token()
    running = IN_FLIGHT.start(label or _CALLING.get())
    finished = anyio.Event()
    outcome: dict[str, Any] = {}

    def report(progress: float, total: float | None, message: str | None) -> None:
        # A lost progress message (the session closed meanwhile) must not fail the work.
        with contextlib.suppress(Exception):
            anyio.from_thread.run(ctx.report_progress, progress, total, message, token=token)

    def target() -> None:
        try:
            outcome["value"] = work(progress=relay(report), cancel=running.cancel)
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            if "value" in outcome:
                IN_FLIGHT.finish(running, _described(describe_result, outcome["value"]))
            else:
                IN_FLIGHT.finish(running, _ending(outcome.get("error")))
            try:
                anyio.from_thread.run_sync(finished.set, token=token)
            except RuntimeError:  # the event loop is gone: nobody is waiting
                pass

    threading.Thread(target=target, name="gemmaserve-mcp-work", daemon=True).start()
    try:
        await finished.wait()
    except anyio.get_cancelled_exc_class():
        running.cancel.cancel()
        with anyio.CancelScope(shield=True):
            await finished.wait()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


# A tool's argument model, JSON schema and hints follow from its request model, result, title and body
# alone, never from the deps a build closes over; making them is ~6 ms a tool, most of build_server's time.
# Each is made once a process; every build gets a copy bound to its own function.
_ACTION_TOOLS: dict[tuple[Any, ...], Tool] = {}


class ToolSet:
    """Where the ``tools_*`` modules register their tools; :func:`gemmaserve.mcp_server.build_server` serves them.

    Every tool's arguments are strict: an unknown name is an error that says which names exist (a typo
    must not silently widen a query). :meth:`action` builds a tool from an action's request model: the
    model's fields are the tool's parameters (names, defaults and ranges as the CLI's options), the tool
    body receives the validated request, and ``confirm`` is added exactly when the request needs it.
    """

    def __init__(self) -> None:
        self.tools: list[Tool] = []

    def action(
        self, model: type[ActionRequest], *, title: str, result: type[BaseModel]
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register ``body(request)`` or ``body(request, ctx)`` (sync or async) as the tool for ``model.action``,
        its hints from ``model.effect``."""

        def register(body: Callable[..., Any]) -> Callable[..., Any]:
            wants_context = "ctx" in inspect.signature(body).parameters
            parameters = request_parameters(model)
            if wants_context:
                parameters.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context))

            def prepare(arguments: dict[str, Any]) -> tuple[ActionRequest, Any]:
                confirm = arguments.pop("confirm", False)
                ctx = arguments.pop("ctx", None)
                request = model.parse(arguments)
                if request.needs_confirmation():
                    require_confirmation(
                        confirm, request.describe_change(), has_dry_run="dry_run" in model.model_fields
                    )
                return request, ctx

            if inspect.iscoroutinefunction(body):

                async def tool_fn(**arguments: Any) -> Any:
                    request, ctx = prepare(arguments)
                    calling = _CALLING.set(mcp_name(model.action))
                    try:
                        return await (body(request, ctx) if wants_context else body(request))
                    finally:
                        _CALLING.reset(calling)

            else:

                def tool_fn(**arguments: Any) -> Any:  # type: ignore[misc]
                    request, ctx = prepare(arguments)
                    return body(request, ctx) if wants_context else body(request)

            returns = Annotated[CallToolResult, result]
            tool_fn.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
            tool_fn.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
            tool_fn.__name__ = tool_fn.__qualname__ = mcp_name(model.action)
            tool_fn.__doc__ = body.__doc__
            tool_fn.__module__ = body.__module__
            key = (model, result, title, body.__code__)
            template = _ACTION_TOOLS.get(key)
            if template is None:
                template = strict_arguments(
                    Tool.from_function(
                        tool_fn, name=mcp_name(model.action), title=title, annotations=tool_hints(model.effect),
                        context_kwarg="ctx" if wants_context else None,
                    )
                )  # fmt: skip
                _ACTION_TOOLS[key] = template
            self.tools.append(template.model_copy(update={"fn": translate_errors(tool_fn)}))
            return body

        return register


def tool_hints(effect: Effect) -> ToolAnnotations:
    """MCP's hints for an action's effect: what an agent's client may show or auto-approve."""
    return ToolAnnotations(
        read_only_hint=effect.reads_only,
        destructive_hint=effect.destroys,
        idempotent_hint=effect.repeatable,
        open_world_hint=effect.remote,
    )


def mcp_name(action: str) -> str:
    """The MCP tool for a CLI command path: ``checkpoint grid-check`` → ``checkpoint_grid_check``."""
    return action.replace(" ", "_").replace("-", "_")


def request_parameters(model: type[ActionRequest]) -> list[inspect.Parameter]:
    """The tool parameters for a request model: its fields, plus ``confirm`` when it may need one."""
    parameters = []
    if model.confirmation:
        # not required: a dry run needs none (the tool body refuses a real change without it)
        parameters.append(
            inspect.Parameter("confirm", inspect.Parameter.KEYWORD_ONLY, annotation=Confirm, default=False)
        )
    for name, field in mcp_fields(model).items():
        annotation = Annotated[(field.annotation, *field.metadata, Field(description=field.description))]  # type: ignore[name-defined]
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        )
    return parameters


def strict_arguments(tool: Tool) -> Tool:
    """Make ``tool`` reject arguments it does not have, naming the nearest one it has."""
    loose = tool.fn_metadata.arg_model
    known = sorted(field.alias or name for name, field in loose.model_fields.items())

    def reject_unknown(cls: type[BaseModel], data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(known))
            if unknown:
                import difflib

                near = [match for name in unknown for match in difflib.get_close_matches(name, known, n=1)]
                guess = f" Did you mean {', '.join(repr(name) for name in near)}?" if near else ""
                raise ValueError(
                    f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}.{guess} "
                    f"This tool takes: {', '.join(known) or 'no arguments'}."
                )
        return data

    strict: type[Any] = type(
        loose.__name__,
        (loose,),
        {
            "__module__": loose.__module__,
            # hide_input_in_errors: a validation error must not quote the arguments (they may hold a token)
            "model_config": ConfigDict(**{**loose.model_config, "extra": "forbid", "hide_input_in_errors": True}),
            "_reject_unknown": model_validator(mode="before")(classmethod(reject_unknown)),  # type: ignore[arg-type]
        },
    )
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool
