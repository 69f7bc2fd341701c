"""Click options built from an action's request model, so the CLI cannot drift from the library or MCP.

``@request_options(StartRequest)`` gives a command one option per field (``--max-model-len`` for
``max_model_len``: type, default, range, choices and help taken from the field) and hands the command a
validated ``request`` instead of loose keyword arguments. Actions whose request needs confirmation also
get ``--yes``; :func:`confirm` asks on a terminal and refuses elsewhere, as MCP refuses without
``confirm=true``.
"""

from __future__ import annotations

import enum
import functools
import inspect
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import annotated_types
import click
from pydantic.fields import FieldInfo

from gemmaserve.errors import ConfirmationRequired
from gemmaserve.request_model import ActionRequest, TokenCountMarker, cli_marker, ordered_fields, parse_token_count

F = TypeVar("F", bound=Callable[..., Any])

YES_HELP = "Do not ask for confirmation (needed when stdin is not a terminal)."
JSON_HELP = "Print the result as one JSON document."
ASKS_FIRST = "Asks first (--yes off a terminal)"


def _with_confirmation_note(doc: str | None, model: type[ActionRequest]) -> str | None:
    """The help of an action that asks first says so, in one wording, before its examples."""
    if doc is None or not model.confirmation:
        return doc
    note = ASKS_FIRST + ("; a dry run needs neither." if "dry_run" in model.model_fields else ".")
    text = inspect.cleandoc(doc)
    body, examples, rest = text.partition("\n\n\b\nExamples:")
    # the note ends the paragraph under the summary line, or is that paragraph
    joined = f"{body} {note}" if "\n\n" in body else f"{body}\n\n{note}"
    return f"{joined}{examples}{rest}"


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def is_list_field(field: FieldInfo) -> bool:
    annotation = _unwrap_optional(field.annotation)
    return typing.get_origin(annotation) in (list, tuple, set, frozenset)


def _bounds(field: FieldInfo) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            bounds["min"] = item.ge
        elif isinstance(item, annotated_types.Gt):
            bounds["min"], bounds["min_open"] = item.gt, True
        elif isinstance(item, annotated_types.Le):
            bounds["max"] = item.le
        elif isinstance(item, annotated_types.Lt):
            bounds["max"], bounds["max_open"] = item.lt, True
    return bounds


class TokenCountType(click.ParamType):  # type: ignore[type-arg]
    """A token count as ``vllm serve`` reads one (``8192``, ``32k``, ``32K``); the request model checks its range."""

    name = "tokens"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            parsed = parse_token_count(value)
            return parsed if isinstance(parsed, int) else int(str(parsed))
        except ValueError as exc:
            self.fail(
                f"{value!r} is not a token count ({exc})"
                if "suffix" in str(exc)
                else f"{value!r} is not a token count: write 8192, 32k (32,000) or 32K (32,768)",
                param,
                ctx,
            )


def click_type(field: FieldInfo) -> Any:
    """The click parameter type for one field (one element's type for a list field)."""
    if any(isinstance(item, TokenCountMarker) for item in field.metadata):
        return TokenCountType()
    annotation = _unwrap_optional(field.annotation)
    if is_list_field(field):
        annotation = _unwrap_optional(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) is Literal:
        return click.Choice([str(choice) for choice in typing.get_args(annotation)])
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return click.Choice([str(member.value) for member in annotation])
    if annotation is bool:
        return click.BOOL
    if annotation is int:
        return click.IntRange(**_bounds(field)) if _bounds(field) else click.INT
    if annotation is float:
        return click.FloatRange(**_bounds(field)) if _bounds(field) else click.FLOAT
    if annotation is Path:
        return click.Path(path_type=Path)
    return click.STRING


def _default(field: FieldInfo) -> Any:
    value = field.get_default(call_default_factory=True)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def click_params(name: str, field: FieldInfo) -> click.Parameter:
    """The one click option (or argument) for field ``name``."""
    marker = cli_marker(field.metadata)
    kind = click_type(field)
    required = field.is_required()
    default = None if required else _default(field)  # a required field has no default to show
    if marker.argument:
        return click.Argument(
            [name], type=click.UNPROCESSED if marker.unprocessed else kind, required=required, default=None if required else default,
            nargs=-1 if is_list_field(field) else 1, metavar=marker.metavar,
        )  # fmt: skip
    long = "--" + name.replace("_", "-")
    declarations = [long, *marker.aliases] + ([marker.short] if marker.short else [])
    help_text = field.description or ""
    if kind is click.BOOL and not is_list_field(field):
        if default is True:
            off = marker.flag_off or "--no-" + name.replace("_", "-")
            return click.Option([f"{long}/{off}", name], default=True, show_default=True, help=help_text)
        return click.Option([*declarations, name], is_flag=True, default=False, help=help_text)
    return click.Option(
        [*declarations, name], type=kind, multiple=is_list_field(field), required=required,
        default=default if default not in (None, ()) else None, show_default=default not in (None, ()),
        metavar=marker.metavar, help=help_text + (" Repeatable." if is_list_field(field) else ""),
    )  # fmt: skip


def request_options(model: type[ActionRequest], *, yes_in_body: bool = False) -> Callable[[F], F]:
    """Decorate a click command so that it takes one ``request: model`` built from its options.

    With a model that needs confirmation, ``--yes`` is added, the help says that the command asks first, and
    :func:`confirm` runs before the command, unless ``yes_in_body`` (the command asks itself, later, with more
    to say: ``yes`` is then passed on). Every action prints its result as JSON on ``--json`` (the command gets
    ``as_json``), listed last in ``--help``; the command's own options (``--wide``) are kept as they are.
    """

    def decorate(command: F) -> F:
        fields = ordered_fields(model)

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            values = {}
            for name in fields:
                value = kwargs.pop(name, None)
                if isinstance(value, tuple):
                    value = list(value) if value else None
                if value is None:
                    continue  # the model's default, declared once
                values[name] = value
            request = model.parse(values)
            if model.confirmation:
                yes = kwargs.pop("yes")
                if yes_in_body:
                    kwargs["yes"] = yes
                else:
                    confirm(request, yes)
            return command(*args, request=request, **kwargs)

        run.__doc__ = _with_confirmation_note(command.__doc__, model)
        params = [click_params(name, field) for name, field in fields.items()]
        if model.confirmation:
            params.append(click.Option(["--yes", "-y", "yes"], is_flag=True, help=YES_HELP))
        existing = getattr(run, "__click_params__", [])
        # click applies decorators bottom-up and reverses at the end: append ours reversed so the model's
        # field order is the order in --help, then the command's own options, then --json.
        as_json = click.Option(["--json", "as_json"], is_flag=True, help=JSON_HELP)
        run.__click_params__ = [as_json, *existing, *reversed(params)]  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


def confirm(request: ActionRequest, yes: bool, prompt: str | None = None) -> None:
    """Ask before a change on a terminal; refuse without ``--yes`` elsewhere. Dry runs need nothing."""
    if yes or not request.needs_confirmation():
        return
    what = prompt or request.describe_change()
    if not sys.stdin.isatty():
        raise ConfirmationRequired(
            f"Refused to {what}: this changes something and stdin is not a terminal to ask on.",
            hint="Add --yes once you are sure"
            + (" (or --dry-run to see what would happen)." if "dry_run" in type(request).model_fields else "."),
            action=what,
        )
    if not click.confirm(what[:1].upper() + what[1:] + "?", err=True):
        raise click.exceptions.Abort()
