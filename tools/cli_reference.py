"""Regenerate docs/cli-reference.md from the CLI's own --help (checked by tests/test_cli_reference.py).

Usage: python tools/cli_reference.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "cli-reference.md"


def _walk(command: click.Command, path: list[str], ctx: click.Context | None) -> list[tuple[str, str]]:
    name = " ".join(path)
    sub_ctx = click.Context(command, info_name=path[-1], parent=ctx, terminal_width=100, max_content_width=100)
    pages = [(name, command.get_help(sub_ctx))]
    if isinstance(command, click.Group):
        for child in command.list_commands(sub_ctx):
            sub = command.get_command(sub_ctx, child)
            if sub is not None and not sub.hidden:
                pages += _walk(sub, [*path, child], sub_ctx)
    return pages


def render() -> str:
    from gemmaserve.cli import app

    parts = [
        "# CLI reference\n",
        "Generated from `--help` by `python tools/cli_reference.py`; a test fails when it is stale.\n",
    ]
    for name, text in _walk(app, ["gemmaserve"], None):
        parts.append(f"## `{name}`\n\n```\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
        if current != text:
            print("docs/cli-reference.md is stale: run python tools/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
