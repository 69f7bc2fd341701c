"""What a result says to people, before it is drawn: a page of lines and tables (pure data, no I/O).

A view turns one result into a :class:`Page`. The same page is then drawn three ways, so the front ends
can never tell two stories: a rich table on a terminal (:mod:`gemmaserve.views.terminal`), plain
aligned lines off a terminal (:func:`plain_lines`: logs, pipes, ``grep``), and the MCP tool's text
(:func:`summary_text`, whose tables are cut to a few rows: the whole result is in the structured content).
Text is never markup: a model name with brackets prints as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Style = Literal["good", "bad", "warn", "dim", "bold"]
Align = Literal["left", "right"]

#: Rows of each table an MCP summary keeps; the structured content carries every row.
SUMMARY_ROWS = 12


@dataclass(frozen=True)
class Line:
    """One line of text; ``style`` is how a terminal shows it (plain text ignores it)."""

    text: str
    style: Style | None = None


@dataclass(frozen=True)
class Column:
    name: str
    align: Align = "left"


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]
    style: Style | None = None


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    title: str | None = None

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row.cells) != len(self.columns):
                raise ValueError(f"a row of {len(row.cells)} cells in a table of {len(self.columns)} columns")


Block = Line | Table


@dataclass(frozen=True)
class Page:
    """A result as people read it: blocks in order. The first line is its headline (the MCP summary's
    first line)."""

    blocks: tuple[Block, ...] = field(default_factory=tuple)

    @property
    def headline(self) -> str:
        for block in self.blocks:
            if isinstance(block, Line):
                return block.text
            if block.title:
                return block.title
        return ""


def page(*blocks: Block | str | None) -> Page:
    """A page from lines (``str`` or :class:`Line`) and tables; ``None`` entries are left out, so a view
    can write ``line if condition else None``."""
    return Page(tuple(Line(block) if isinstance(block, str) else block for block in blocks if block is not None))


def table(
    columns: Sequence[str | Column], rows: Sequence[Sequence[object] | Row], *, title: str | None = None
) -> Table:
    """A table from column names (a name ending in ``>`` is right-aligned: ``"KV tokens>"``) and rows of
    cells (anything, shown with ``str``; None as ``–``)."""
    heads = tuple(
        column
        if isinstance(column, Column)
        else Column(column[:-1], "right")
        if column.endswith(">")
        else Column(column)
        for column in columns
    )
    built = tuple(
        row if isinstance(row, Row) else Row(tuple("–" if cell is None else str(cell) for cell in row)) for row in rows
    )
    return Table(heads, built, title)


def plain_lines(shown: Page, *, max_rows: int | None = None) -> list[str]:
    """The page as plain text: lines as written, tables as columns two spaces apart with a header row.

    ``max_rows`` cuts each table to that many rows and says how many were left out.
    """
    out: list[str] = []
    for block in shown.blocks:
        if isinstance(block, Line):
            out.append(block.text)
        else:
            out.extend(_plain_table(block, max_rows))
    return out


def _plain_table(shown: Table, max_rows: int | None) -> list[str]:
    rows = shown.rows if max_rows is None else shown.rows[:max_rows]
    cells = [tuple(column.name for column in shown.columns), *(row.cells for row in rows)]
    widths = [max(len(line[index]) for line in cells) for index in range(len(shown.columns))]

    def lay_out(line: tuple[str, ...]) -> str:
        parts = [
            text.rjust(width) if column.align == "right" else text.ljust(width)
            for text, width, column in zip(line, widths, shown.columns, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [shown.title] if shown.title else []
    out += [lay_out(line) for line in cells]
    if len(rows) < len(shown.rows):
        out.append(f"({len(shown.rows) - len(rows)} more rows in the structured result)")
    if not shown.rows:
        out.append("(no rows)")
    return out


def summary_text(shown: Page) -> str:
    """The MCP tool's text: the whole page, each table cut to :data:`SUMMARY_ROWS` rows."""
    return "\n".join(plain_lines(shown, max_rows=SUMMARY_ROWS))
