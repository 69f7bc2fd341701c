"""A :class:`~gemmaserve.views.page.Page` drawn with rich for a terminal: tables with borders, styled lines.

rich is imported here, on first use (it costs ~50 ms at start-up). Text is never read as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gemmaserve.views.page import Line, Page, Style

if TYPE_CHECKING:
    from rich.console import Console

#: How each page style looks on a terminal.
RICH_STYLES: dict[Style, str] = {"good": "green", "bad": "red", "warn": "yellow", "dim": "dim", "bold": "bold"}


def draw(shown: Page, out: Console) -> None:
    """Print ``shown`` on ``out``: each line as written (wrapped at the console's width), each table boxed."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    for block in shown.blocks:
        if isinstance(block, Line):
            out.print(Text(block.text, style=_style(block.style)), soft_wrap=True)
            continue
        drawn = RichTable(title=block.title, box=box.SIMPLE_HEAD, title_justify="left", highlight=False)
        for column in block.columns:
            drawn.add_column(column.name, justify=column.align, overflow="fold")
        for row in block.rows:
            drawn.add_row(*(Text(cell) for cell in row.cells), style=_style(row.style))
        out.print(drawn)


def _style(style: Style | None) -> Any:
    return RICH_STYLES[style] if style is not None else ""
