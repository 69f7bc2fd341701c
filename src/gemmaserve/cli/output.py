"""Render one typed result three ways: a rich table (stdout), ``--json``, or plain lines.

stdout carries exactly one thing; progress, warnings and hints go to stderr.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click
from pydantic import BaseModel

json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")


def to_jsonable(result: BaseModel | list[BaseModel] | dict[str, Any]) -> Any:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    if isinstance(result, list):
        return [to_jsonable(item) for item in result]
    return result


def emit(result: Any, *, as_json: bool, render: Callable[[Any], None]) -> None:
    """Print ``result`` as JSON or through ``render`` (which writes a table to stdout)."""
    if as_json:
        click.echo(json.dumps(to_jsonable(result), indent=2))
    else:
        render(result)


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
