"""Print one typed result: ``--json``, or its view (:mod:`gemmaserve.views`) as a rich table on a terminal and
as plain lines elsewhere; then exit with the status its ``ok`` gives (:func:`finish`).

stdout carries exactly one thing; progress, warnings and hints go to stderr.
"""

from __future__ import annotations

import json
import math
from typing import Any

import click
from pydantic import BaseModel

from gemmaserve.result_model import ActionResult


def to_jsonable(result: BaseModel | list[BaseModel] | dict[str, Any]) -> Any:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    if isinstance(result, list):
        return [to_jsonable(item) for item in result]
    return result


def standard_json(data: Any) -> Any:
    """``data`` with every NaN or infinite float as null: standard JSON has no NaN or Infinity, and a reader
    that takes them would take a number for what is not one. The result's own fields say why a value is null."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {key: standard_json(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [standard_json(item) for item in data]
    return data


def show(result: Any, *, as_json: bool) -> None:
    """Print ``result``: JSON (standard JSON only), else its view, drawn for a terminal or as plain lines."""
    import sys

    if as_json:
        click.echo(json.dumps(standard_json(to_jsonable(result)), indent=2, allow_nan=False))
        return
    from gemmaserve.views import page_for

    shown = page_for(result)
    if sys.stdout.isatty():
        from gemmaserve.views.terminal import draw

        draw(shown, console())
        return
    from gemmaserve.views.page import plain_lines

    for line in plain_lines(shown):
        click.echo(line)


def finish(result: ActionResult, *, as_json: bool) -> None:
    """:func:`show` ``result``, then end the command with the exit status it calls for (the one place a
    command's status is decided: :func:`gemmaserve.cli.errors.exit_code_for`)."""
    from gemmaserve.cli.errors import EXIT_OK, exit_code_for

    show(result, as_json=as_json)
    code = exit_code_for(result)
    if code != EXIT_OK:
        raise click.exceptions.Exit(code)


def console(min_width: int = 200) -> Any:
    """A rich console on stdout (imported lazily: rich costs ~50 ms); off a terminal at least ``min_width`` wide."""
    import shutil
    import sys

    from rich.console import Console

    # Piped output is read by people too: do not squeeze tables into 80 columns.
    width = None if sys.stdout.isatty() else max(shutil.get_terminal_size((min_width, 24)).columns, min_width)
    return Console(soft_wrap=False, width=width)


def err_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def warn(message: str) -> None:
    click.secho(f"Warning: {message}", err=True, fg="yellow")
