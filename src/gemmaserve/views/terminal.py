"""A :class:`~gemmaserve.views.page.Page` drawn with rich for a terminal: tables with borders, styled lines.

rich is imported here, on first use (it costs ~50 ms at start-up). Text is never read as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gemmaserve.views.page import Line, Page, Style, Table

if TYPE_CHECKING:
    from rich.console import Console

#: How each page style looks on a terminal.
RICH_STYLES: dict[Style, str] = {"good": "green", "bad": "red", "warn": "yellow", "dim": "dim", "bold": "bold"}


#: The narrowest the first column of a table too wide for the terminal is folded to.
FIRST_COLUMN_MIN_WIDTH = 16


def draw(shown: Page, out: Console) -> None:
    """Print ``shown`` on ``out``: each line as written (wrapped at the console's width), each table boxed."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    for index, block in enumerate(shown.blocks):
        if isinstance(block, Line):
            out.print(Text(block.text, style=_style(block.style)), soft_wrap=True)
            continue
        # Two spaces between columns and none at the edges, as the plain lines have: the plan's table keeps
        # to 100 columns on a terminal of 100 (docs/plan.md) instead of folding its cells.
        drawn = RichTable(
            title=block.title,
            box=box.SIMPLE_HEAD,
            title_justify="left",
            highlight=False,
            pad_edge=False,
            collapse_padding=True,
            show_edge=False,
        )
        for column, width in zip(block.columns, column_widths(block, out.width), strict=True):
            drawn.add_column(column.name, justify=column.align, overflow="fold", width=width)
        for row in block.rows:
            drawn.add_row(*(Text(cell) for cell in row.cells), style=_style(row.style))
        out.print(drawn)
        if index + 1 < len(shown.blocks):
            out.print()  # a blank line between a table and what follows it


def column_widths(shown: Table, console_width: int) -> list[int | None]:
    """Each column's width when ``shown`` is wider than the console, else all None (natural widths).

    The first column names the row (a tensor, a model, a GPU) and gets what the others leave when their cells
    wrap at spaces, at least 16: folded in that room it stays whole and readable
    ("model.language_model.layers.0.mlp.down_proj" over a few lines), where rich's own squeeze would cut
    every column alike and fold numbers mid-digit. When the first column is narrowed, each other column is
    as wide as its longest word.
    """
    texts = [[column.name, *(row.cells[index] for row in shown.rows)] for index, column in enumerate(shown.columns)]
    natural = [max(len(text) for text in column) for column in texts]
    borders = 2 * (len(texts) - 1)  # two spaces between columns, none at the edges (draw)
    if not shown.rows or sum(natural) + borders <= console_width:
        return [None] * len(texts)
    words = [max((len(word) for text in column for word in text.split()), default=1) for column in texts[1:]]
    first = min(natural[0], max(FIRST_COLUMN_MIN_WIDTH, console_width - borders - sum(words)))
    if first == natural[0]:
        return [first, *([None] * len(words))]
    return [first, *words]


def _style(style: Style | None) -> Any:
    return RICH_STYLES[style] if style is not None else ""
