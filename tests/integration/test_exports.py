"""gemmaserve.exports: a package's names imported on first use, from one mapping."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = """
from gemmaserve.exports import lazy_exports

VERSION = "1"
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {".": ("api",), ".api": ("act",), "lazypkg.models": ("Model", "other")},
    defined=("VERSION",),
)
"""

PACKAGES_WITH_ACTIONS = (
    "gemmaserve.bench",
    "gemmaserve.checkpoint",
    "gemmaserve.sagemaker",
    "gemmaserve.serve",
    "gemmaserve.turing",
)


@pytest.fixture
def lazypkg(tmp_path: Path) -> Iterator[object]:
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text(PACKAGE)
    (root / "api.py").write_text("def act() -> str:\n    return 'acted'\n")
    (root / "models.py").write_text("class Model:\n    pass\n\nother = 3\n")
    (root / "unlisted.py").write_text("VALUE = 7\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("lazypkg")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == "lazypkg" or n.startswith("lazypkg.")]:
            del sys.modules[name]


def test_names_load_on_first_use_and_stay(lazypkg: object) -> None:
    assert "lazypkg.models" not in sys.modules
    model = lazypkg.Model  # type: ignore[attr-defined]
    assert "lazypkg.models" in sys.modules
    assert model is sys.modules["lazypkg.models"].Model
    assert vars(lazypkg)["Model"] is model  # kept: the next read does not come back to __getattr__
    assert lazypkg.other == 3  # type: ignore[attr-defined]


def test_a_name_listed_under_the_package_itself_is_its_submodule(lazypkg: object) -> None:
    assert "lazypkg.api" not in sys.modules
    api = lazypkg.api  # type: ignore[attr-defined]
    assert api is sys.modules["lazypkg.api"]
    assert lazypkg.act() == "acted"  # type: ignore[attr-defined]


def test_all_and_dir_list_every_export(lazypkg: object) -> None:
    assert lazypkg.__all__ == ["Model", "VERSION", "act", "api", "other"]  # type: ignore[attr-defined]
    listed = dir(lazypkg)
    assert {"Model", "VERSION", "act", "api", "other"} <= set(listed)
    assert listed == sorted(listed)
    assert "lazypkg.models" not in sys.modules  # dir() imports nothing


def test_an_unknown_name_is_an_attribute_error_and_submodules_still_import(lazypkg: object) -> None:
    with pytest.raises(AttributeError, match=r"^module 'lazypkg' has no attribute 'missing'$"):
        lazypkg.missing  # type: ignore[attr-defined]  # noqa: B018
    from lazypkg import unlisted  # type: ignore[import-not-found]

    assert unlisted.VALUE == 7


@pytest.mark.parametrize(
    "package",
    ["gemmaserve", *PACKAGES_WITH_ACTIONS],
)
def test_every_export_of_the_packages_resolves(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_importing_the_packages_loads_none_of_their_exports() -> None:
    code = (
        "import sys, gemmaserve, gemmaserve.bench, gemmaserve.checkpoint, gemmaserve.sagemaker, gemmaserve.serve, "
        "gemmaserve.turing; "
        "heavy = {'numpy', 'aiohttp', 'boto3', 'pydantic', 'gemmaserve.plan', 'gemmaserve.bench.measure'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("package", PACKAGES_WITH_ACTIONS)
def test_a_package_exports_the_request_model_of_each_of_its_actions(package: str) -> None:
    from gemmaserve.actions import REQUESTS

    exported = set(importlib.import_module(package).__all__)
    own = {entry.split(":")[1] for entry in REQUESTS if entry.startswith(f"{package}.")}
    assert own
    assert own - exported == set()


@pytest.mark.parametrize("package", ["gemmaserve", *PACKAGES_WITH_ACTIONS])
def test_what_type_checkers_see_is_what_the_package_exports(package: str) -> None:
    """The names imported under TYPE_CHECKING (all a type checker knows of the lazy ones) are the lazy ones."""
    import ast

    module = importlib.import_module(package)
    tree = ast.parse(Path(module.__file__ or "").read_text())
    guarded = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    seen = {
        alias.asname or alias.name
        for node in guarded.body
        if isinstance(node, ast.ImportFrom | ast.Import)
        for alias in node.names
    }
    # names the package defines itself (not through lazy_exports)
    defined = {target.id for node in tree.body if isinstance(node, ast.Assign) for target in node.targets
               if isinstance(target, ast.Name)}  # fmt: skip
    defined |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    assert seen == set(module.__all__) - defined
