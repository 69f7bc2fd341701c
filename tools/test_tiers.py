"""List each test file's tier (unit, integration, engine) by one rule, read from its source.

The rule (CONTRIBUTING.md, "Test tiers"):

- **engine**: a test of the file is marked ``engine`` or runs the engine venv's interpreter
  (``engine_python()``): it needs the real vLLM (``GEMMASERVE_ENGINE_PYTHON``).
- **integration**: the file, or a fixture it uses (from a ``conftest.py``, followed through the
  fixtures that fixture uses), starts a process or a server, or reads something this checkout does
  not make at test time: a subprocess (``subprocess``, ``sys.executable``), a server on loopback
  (moto's, the mock OpenAI server, an ``HTTPServer``, a fake runtime), a socket, the real Triton
  compiler or the vLLM source cache (``vllm_kernel_files``).
- **unit**: everything else: pure functions and in-process calls on files written at test time.

    python tools/test_tiers.py                 # every file, its tier and the first reason found
    python tools/test_tiers.py --tier unit     # the files of one tier, one a line (for pytest)
    python tools/test_tiers.py --check         # exit 1 naming each file that lies in another tier's folder

On disk a file's folder is its tier: ``tests/unit/<area>/``, ``tests/integration/<area>/`` and
``tests/engine/``; shared fixtures and fakes live in ``tests/support/<area>/`` (no tests there).

Standard library only; it reads the sources and imports nothing of them.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
TIERS = ("unit", "integration", "engine")

#: What makes code integration, each with the words a reason names it by.
INTEGRATION = {
    r"\bsubprocess\b|\bPopen\b|sys\.executable": "a subprocess",
    r"\bmoto\b|ThreadedMotoServer|moto_server_url|mock_aws": "moto",
    r"mock_server|HTTPServer|start_fake_runtime|aiohttp\.web|web\.AppRunner": "a server on loopback",
    r"\bsocket\.socket\b|\bbind\(\(": "a socket",
    r"\bvllm_kernel_files\b|released_vllm_versions": "the vLLM source cache",
    r"importorskip\(\"triton\"\)|import triton\b": "the real Triton",
}
ENGINE = re.compile(r"pytest\.mark\.engine\b|\bengine_python\(\)")


def first_reason(text: str) -> str | None:
    for pattern, reason in INTEGRATION.items():
        if re.search(pattern, text):
            return reason
    return None


def _fixtures(tree: ast.Module, text: str) -> dict[str, tuple[str, list[str]]]:
    """{fixture name: (its source, the fixtures it takes)} for the ``@pytest.fixture`` functions of a module."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list):
            source = ast.get_source_segment(text, node) or ""
            found[node.name] = (source, [arg.arg for arg in node.args.args])
    return found


def integration_fixtures() -> dict[str, str]:
    """{fixture name: reason} for the conftest fixtures that are integration, directly or through another."""
    defined: dict[str, tuple[str, list[str]]] = {}
    for module in sorted([*TESTS.rglob("conftest.py"), *(TESTS / "support").rglob("fixtures.py")]):
        text = module.read_text(encoding="utf-8")
        defined.update(_fixtures(ast.parse(text), text))
    reasons = {name: r for name, (source, _) in defined.items() if (r := first_reason(source))}
    changed = True
    while changed:
        changed = False
        for name, (_, takes) in defined.items():
            via = next((f for f in takes if f in reasons), None)
            if name not in reasons and via is not None:
                reasons[name] = f"{reasons[via]} (fixture {via})"
                changed = True
    return reasons


def tier_of(path: Path, fixtures: dict[str, str]) -> tuple[str, str]:
    """(tier, reason) of one test file."""
    text = path.read_text(encoding="utf-8")
    if ENGINE.search(text):
        return "engine", "the engine venv"
    reason = first_reason(text)
    if reason:
        return "integration", reason
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            used = next((arg.arg for arg in node.args.args if arg.arg in fixtures), None)
            if used:
                return "integration", f"{fixtures[used]} (fixture {used})"
        if isinstance(node, ast.Name) and node.id in fixtures and node.id != "pytest":
            return "integration", f"{fixtures[node.id]} (fixture {node.id})"
    return "unit", "in-process only"


def folder_tier(path: Path) -> str | None:
    """The tier a test file's folder names (``tests/<tier>/...``), or None where it names none."""
    parts = path.relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def misplaced(rows: list[tuple[str, str, str]]) -> list[str]:
    """One line per test file whose folder is not its tier by the rule: where it lies and where it goes."""
    lines = []
    for path, tier, reason in rows:
        placed = folder_tier(ROOT / path)
        if placed != tier:
            lines.append(
                f"{path}: {tier} ({reason}), but it lies in {placed or 'no tier folder'}: move it to tests/{tier}/"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=TIERS, help="print only this tier's files, one a line")
    parser.add_argument("--check", action="store_true", help="exit 1 if a test file lies in another tier's folder")
    args = parser.parse_args(argv)
    fixtures = integration_fixtures()
    rows = [(str(path.relative_to(ROOT)), *tier_of(path, fixtures)) for path in sorted(TESTS.rglob("test_*.py"))]
    if args.check:
        wrong = misplaced(rows)
        print("\n".join(wrong) if wrong else f"every one of {len(rows)} test files lies in its tier's folder")
        return 1 if wrong else 0
    if args.tier:
        print("\n".join(path for path, tier, _ in rows if tier == args.tier))
        return 0
    for path, tier, reason in rows:
        print(f"{tier:<12} {path}  ({reason})")
    counts = Counter(tier for _, tier, _ in rows)
    print(", ".join(f"{counts[tier]} {tier}" for tier in TIERS) + f" files of {len(rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
