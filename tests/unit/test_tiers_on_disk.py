"""Each test file lies in its tier's folder (tools/test_tiers.py's rule), so a failure's path says what it means."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _tiers_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_tiers_tool", ROOT / "tools" / "test_tiers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TIERS = _tiers_tool()


def test_every_test_file_lies_in_the_folder_of_its_tier() -> None:
    fixtures = TIERS.integration_fixtures()
    rows = [
        (str(path.relative_to(ROOT)), *TIERS.tier_of(path, fixtures)) for path in sorted(TIERS.TESTS.rglob("test_*.py"))
    ]
    assert len(rows) > 100
    assert TIERS.misplaced(rows) == []


def test_a_file_in_the_wrong_folder_is_named_with_where_it_goes() -> None:
    rows = [
        ("tests/unit/bench/test_measure.py", "integration", "a server on loopback"),
        ("tests/bench/test_stats.py", "unit", "in-process only"),
        ("tests/engine/test_real_engine.py", "engine", "the engine venv"),
    ]
    assert TIERS.misplaced(rows) == [
        "tests/unit/bench/test_measure.py: integration (a server on loopback), but it lies in unit: move it to tests/integration/",
        "tests/bench/test_stats.py: unit (in-process only), but it lies in no tier folder: move it to tests/unit/",
    ]


def test_a_fixture_that_starts_a_server_makes_its_users_integration(tmp_path: Path) -> None:
    fixtures = TIERS.integration_fixtures()
    starts_a_server = sorted(name for name in fixtures if not name.startswith("_"))[
        0
    ]  # named by the tool, so this file stays free of the words it looks for
    user = tmp_path / "test_user.py"
    user.write_text(f"def test_it({starts_a_server}):\n    assert {starts_a_server}\n", encoding="utf-8")
    assert TIERS.tier_of(user, fixtures) == ("integration", f"{fixtures[starts_a_server]} (fixture {starts_a_server})")
    plain = tmp_path / "test_plain.py"
    plain.write_text("def test_it(tmp_path):\n    assert tmp_path\n", encoding="utf-8")
    assert TIERS.tier_of(plain, fixtures) == ("unit", "in-process only")
