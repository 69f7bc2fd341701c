"""A serving default is declared once, in ``ServingSettings``: no library function or model re-declares one.

A second ``max_model_len: int = 8192`` somewhere below the request models is a default that can drift from
the one the front ends show (issue: a new serving setting threaded through seven signatures). The test
doubles under ``gemmaserve.testing`` configure their own servers and are not part of the library.
"""

from __future__ import annotations

import ast
from pathlib import Path

from gemmaserve.request_model import ServingSettings

SRC = Path(__file__).resolve().parents[2] / "src" / "gemmaserve"
# The declared numbers (8192 tokens, 0.9 of the GPU): None, False and the like are no one's number to copy.
DEFAULTS = {
    name: field.default
    for name, field in ServingSettings.model_fields.items()
    if isinstance(field.default, int | float) and not isinstance(field.default, bool)
}


def _copies(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, setting) for every default or comparison that writes a declared serving default as a literal."""
    values = {value: name for name, value in DEFAULTS.items()}
    places: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            places += [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            places.append(node.value)
        elif isinstance(node, ast.Compare):
            places += [node.left, *node.comparators]
    return [
        (place.lineno, values[place.value])
        for place in places
        if isinstance(place, ast.Constant)
        and isinstance(place.value, int | float)
        and not isinstance(place.value, bool)
        and place.value in values
    ]


def test_the_finder_sees_a_copied_default() -> None:
    source = "def plan(model, max_model_len: int = 8192, *, utilisation=0.9): ...\n"
    source += "class Row:\n    budget: float = 0.9\n"
    source += "if row.gpu_memory_utilization != 0.9: pass\n"
    source += "window = 4096\n"
    assert _copies(ast.parse(source)) == [
        (1, "max_model_len"),
        (1, "gpu_memory_utilization"),
        (3, "gpu_memory_utilization"),
        (4, "gpu_memory_utilization"),
    ]


def test_no_serving_default_is_written_outside_the_request_models() -> None:
    assert DEFAULTS.keys() >= {"max_model_len", "gpu_memory_utilization"}
    declared_once = {SRC / "request_model.py"}
    doubles = SRC / "testing"
    copies = [
        f"{path.relative_to(SRC.parent)}:{line} {name}"
        for path in sorted(SRC.rglob("*.py"))
        if path not in declared_once and doubles not in path.parents
        for line, name in _copies(ast.parse(path.read_text()))
    ]
    assert copies == [], (
        "serving defaults written again (read ServingSettings or take the request whole):\n" + "\n".join(copies)
    )
