"""Recognise the shape of vLLM's unified-attention source that the clamp relies on; pure (text in).

Both deliveries depend on the same two facts, checked by syntax tree: a module-level
``_get_tile_size(head_size, sliding_window, element_size, is_prefill)`` and a module-level
``unified_attention`` that looks it up by name at call time. Anything else is refused.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gemmaserve.errors import UnrecognisedSource

TILE_FUNCTION = "_get_tile_size"
TILE_PARAMETERS = ("head_size", "sliding_window", "element_size", "is_prefill")
LAUNCH_FUNCTION = "unified_attention"
KERNEL_FUNCTION = "kernel_unified_attention"
EXPECTED_LINES = (
    "def _get_tile_size(head_size: int, sliding_window: int, element_size: int, is_prefill: bool) -> int:",
    "def unified_attention(q, k, v, out, ...):  # module level",
    "    TILE_SIZE_PREFILL = _get_tile_size(head_size, sliding_window_val, q.element_size(), is_prefill=True)",
    "    TILE_SIZE_DECODE = _get_tile_size(head_size, sliding_window_val, q.element_size(), is_prefill=False)",
    "def kernel_unified_attention(...):  # the @triton.jit kernel with a TILE_SIZE: tl.constexpr parameter",
    "    kernel_unified_attention[grid](..., TILE_SIZE=..., HEAD_SIZE=..., HEAD_SIZE_PADDED=..., BLOCK_M=..., "
    "IS_3D=..., SLIDING_WINDOW=..., num_queries_per_kv=..., query_ptr=...)  # in unified_attention",
)
#: The keyword arguments the launch hook reads (and the kernel must take): with HEAD_SIZE and SLIDING_WINDOW
#: it asks the stock ``_get_tile_size`` for vLLM's own tile, to change warps only where that tile overflows.
LAUNCH_KEYWORDS = (
    "TILE_SIZE",
    "HEAD_SIZE",
    "HEAD_SIZE_PADDED",
    "BLOCK_M",
    "IS_3D",
    "SLIDING_WINDOW",
    "num_queries_per_kv",
    "query_ptr",
)


@dataclass(frozen=True, slots=True)
class SourceShape:
    """Where the tile function sits: 1-based first and last line of its ``def``."""

    tile_function_first_line: int
    tile_function_last_line: int
    tile_calls_in_launch: int


def recognise(source: str, *, where: str) -> SourceShape:
    """The source's shape, or UnrecognisedSource naming what was missing and the lines expected."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise _unrecognised(where, f"it does not parse as Python ({error.msg}, line {error.lineno})") from None
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    tile = functions.get(TILE_FUNCTION)
    if tile is None:
        raise _unrecognised(where, f"no module-level {TILE_FUNCTION}()")
    parameters = tuple(arg.arg for arg in tile.args.posonlyargs + tile.args.args)
    if parameters != TILE_PARAMETERS or tile.args.vararg or tile.args.kwonlyargs:
        raise _unrecognised(where, f"{TILE_FUNCTION}{parameters} differs from {TILE_FUNCTION}{TILE_PARAMETERS}")
    launch = functions.get(LAUNCH_FUNCTION)
    if launch is None:
        raise _unrecognised(where, f"no module-level {LAUNCH_FUNCTION}()")
    calls = [
        node
        for node in ast.walk(launch)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == TILE_FUNCTION
    ]
    if len(calls) < 2:
        raise _unrecognised(where, f"{LAUNCH_FUNCTION}() calls {TILE_FUNCTION}() {len(calls)} times, expected 2")
    if KERNEL_FUNCTION not in functions:
        raise _unrecognised(where, f"no {KERNEL_FUNCTION} kernel")
    launches = [
        node
        for node in ast.walk(launch)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Subscript)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == KERNEL_FUNCTION
    ]
    if len(launches) != 1:
        raise _unrecognised(
            where, f"{LAUNCH_FUNCTION}() launches {KERNEL_FUNCTION}[grid](...) {len(launches)} times, expected once"
        )
    passed = {keyword.arg for keyword in launches[0].keywords}
    missing = [name for name in LAUNCH_KEYWORDS if name not in passed]
    if missing:
        raise _unrecognised(where, f"{KERNEL_FUNCTION}[grid](...) is not passed {', '.join(missing)} by keyword")
    assert tile.end_lineno is not None
    return SourceShape(
        tile_function_first_line=tile.lineno, tile_function_last_line=tile.end_lineno, tile_calls_in_launch=len(calls)
    )


def _unrecognised(where: str, reason: str) -> UnrecognisedSource:
    return UnrecognisedSource(
        f"{where} is not a vLLM unified-attention source gemmaserve knows: {reason}. Expected:\n  "
        + "\n  ".join(EXPECTED_LINES),
        hint="Nothing was changed. Pin a supported vLLM (see `gemmaserve turing status`) or upgrade gemmaserve.",
        file=where,
        reason=reason,
        expected_lines=list(EXPECTED_LINES),
    )
