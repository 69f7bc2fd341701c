"""No library function takes more than six parameters: a request (or ServingSettings) and a deps object go down whole.

The exceptions are code whose argument list is not ours to group, each with its reason. A new long
signature fails here; so does an exception that no longer needs its place.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gemmaserve"
MOST_PARAMETERS = 6

#: Compiled numeric kernels: numba compiles them (and C entry points call them) with arrays and scalars,
#: not Python objects, so their parameters are the kernel's arguments.
KERNELS = {
    "checkpoint/kernels.py": {"fit_bf16", "_fit_pack32", "_check32", "repack_bf16", "check_packed_bf16", "search_bf16"},
    "checkpoint/native.py": {"fit_bf16", "search_bf16", "repack_bf16", "check_packed_bf16"},
    "checkpoint/native_build.py": {"_fit_bf16", "_search_bf16", "_repack_bf16", "_check_packed_bf16"},
}
#: The tile rule's functions are embedded, source and all, in vLLM's kernel file by the file patch
#: (builtins only): their parameters are the kernel launch's values as vLLM's code holds them.
EMBEDDED_IN_VLLM = {"turing/rule.py": {"clamp_tile_size", "launch_num_warps"}}
EXCEPTIONS = {
    path: KERNELS.get(path, set()) | EMBEDDED_IN_VLLM.get(path, set()) for path in {*KERNELS, *EMBEDDED_IN_VLLM}
}


def long_signatures() -> dict[str, set[str]]:
    """{module path under gemmaserve/: names of its functions with more than MOST_PARAMETERS parameters}."""
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                named = [
                    a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")
                ]
                if len(named) > MOST_PARAMETERS:
                    found.setdefault(path.relative_to(SRC).as_posix(), set()).add(node.name)
    return found


def test_no_library_function_takes_more_than_six_parameters() -> None:
    found = long_signatures()
    unexpected = {path: names - EXCEPTIONS.get(path, set()) for path, names in found.items()}
    assert {path: names for path, names in unexpected.items() if names} == {}, (
        "pass the request (or ServingSettings) and a deps object instead of their fields"
    )


def test_every_exception_is_still_needed() -> None:
    found = long_signatures()
    stale = {path: names - found.get(path, set()) for path, names in EXCEPTIONS.items()}
    assert {path: names for path, names in stale.items() if names} == {}
