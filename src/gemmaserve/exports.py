"""A package's public names, imported on first use (PEP 562), from one mapping.

Importing ``gemmaserve`` or one of its packages must stay cheap (no numpy, aiohttp, boto3): each package
lists where its names live, and this builds the package's ``__getattr__``, ``__dir__`` and ``__all__``
from that list. Pure: imports nothing of gemmaserve. Type checkers do not run ``__getattr__``: a package
also imports its names under ``TYPE_CHECKING`` as ``name as name`` (the spelling that re-exports).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple


class LazyExports(NamedTuple):
    """What a package assigns: ``__getattr__, __dir__, __all__ = lazy_exports(__name__, {...})``."""

    getattr: Callable[[str], Any]
    dir: Callable[[], list[str]]
    all: list[str]


def lazy_exports(package: str, homes: Mapping[str, Sequence[str]], *, defined: Sequence[str] = ()) -> LazyExports:
    """The lazy attributes of ``package``, from ``{module: names}``; ``__all__`` also lists ``defined``.

    A module is absolute or relative to ``package`` (``".requests"``); a name listed under the package
    itself (``"."``) is its submodule of that name. A name is imported from its module the first time it
    is read and then kept in the package's namespace. Any other name raises ``AttributeError``, which
    also lets ``from package import submodule`` find a submodule not listed here.
    """
    home = {name: importlib.util.resolve_name(module, package) for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if module == package:
            value: Any = importlib.import_module(f"{package}.{name}")
        else:
            value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(home))

    return LazyExports(__getattr__, __dir__, sorted({*home, *defined}))
