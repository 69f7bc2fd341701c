"""One view per result: how each action's result reads to people, shared by the CLI and the MCP server.

A view is a function from one result type to a :class:`~gemmaserve.views.page.Page`, registered with
:func:`view`. From that page the CLI draws a rich table on a terminal and plain lines elsewhere, and the
MCP server writes its tool text; ``--json`` and the MCP structured content are the result itself. A
result type whose MCP text should differ from its page (a one-line status for an agent) registers a
:func:`summary` too. Views import no front end, and no library module imports a view
(``[tool.importlinter]`` in pyproject.toml).

A result's view lives in the module of its noun (``gemmaserve.serve.supervisor.ServerStatus`` in
``views/serve.py``), imported on the first lookup of such a result, not at start-up: ``gemmaserve --help``
stays fast, and printing a plan does not import the benchmark's views (numpy). A type found in no noun's
module makes the lookup import them all once before it gives up.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from typing import Any, TypeVar

from gemmaserve.views.page import Page, summary_text

R = TypeVar("R")

_PAGES: dict[type, Callable[[Any], Page]] = {}
_SUMMARIES: dict[type, Callable[[Any], str]] = {}
_loaded = False
#: Packages whose results' views live in a module of another name.
_VIEW_MODULE_OF = {"envinfo": "host", "measurements": "bench"}


def view(result_type: type[R]) -> Callable[[Callable[[R], Page]], Callable[[R], Page]]:
    """Register the decorated function as ``result_type``'s view (one per type: a second is a bug)."""

    def register(render: Callable[[R], Page]) -> Callable[[R], Page]:
        if result_type in _PAGES:
            raise RuntimeError(f"{result_type.__name__} has two views: {_PAGES[result_type]} and {render}")
        _PAGES[result_type] = render
        return render

    return register


def summary(result_type: type[R]) -> Callable[[Callable[[R], str]], Callable[[R], str]]:
    """Register the decorated function as ``result_type``'s MCP text, in place of its page's."""

    def register(write: Callable[[R], str]) -> Callable[[R], str]:
        _SUMMARIES[result_type] = write
        return write

    return register


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{module.name}")
        _loaded = True


def _load_noun_of(kind: type) -> None:
    """Import the view module of ``kind``'s noun (``gemmaserve.<noun>...`` → ``views/<noun>.py``), if any."""
    parts = kind.__module__.split(".")
    if parts[0] != "gemmaserve" or len(parts) < 2:
        return
    module = f"{__name__}.{_VIEW_MODULE_OF.get(parts[1], parts[1])}"
    if importlib.util.find_spec(module) is not None:
        importlib.import_module(module)


def _lookup(table: dict[type, Callable[[Any], Any]], result: object) -> Callable[[Any], Any] | None:
    for kind in type(result).__mro__:
        _load_noun_of(kind)
        if kind in table:
            return table[kind]
    if not _loaded:
        _load()
        return _lookup(table, result)
    return None


def page_for(result: object) -> Page:
    """``result``'s page. Raises ``LookupError`` for a type with no view (a bug: tests/unit/test_views.py
    checks every tool's result type has one)."""
    render = _lookup(_PAGES, result)
    if render is None:
        raise LookupError(f"no view for {type(result).__qualname__}: register one in a module of {__name__}")
    page: Page = render(result)
    return page


def summary_for(result: object) -> str:
    """The MCP tool's text for ``result``: its own summary if it has one, else its page as plain text."""
    write = _lookup(_SUMMARIES, result)
    if write is not None:
        text: str = write(result)
        return text
    return summary_text(page_for(result))


def registered() -> set[type]:
    """Every result type with a view."""
    _load()
    return set(_PAGES)
