"""Real vLLM kernel files, read from the tests' cache only; ``python tools/fetch_vllm_sources.py`` fills it.

The test run needs no network once installed: a test that needs a file the cache lacks is skipped with
the fill command in its reason (a skip, never a pass). CI fills the cache before the test command.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from gemmaserve.turing.versions import TESTED_VLLM_VERSIONS


def _load_sources_tool() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "tools" / "fetch_vllm_sources.py"
    spec = importlib.util.spec_from_file_location("fetch_vllm_sources", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCES = _load_sources_tool()


def _not_cached(what: str) -> str:
    return f"{what} not in the test cache ({SOURCES.cache_root()}): fill it with `{SOURCES.FILL_COMMAND}`"


@pytest.fixture(scope="session")
def vllm_kernel_files() -> dict[str, Path]:
    """{version: path} for every release in TESTED_VLLM_VERSIONS, from the cache."""
    files = {version: SOURCES.cached_kernel_file(version) for version in TESTED_VLLM_VERSIONS}
    missing = [version for version, path in files.items() if path is None]
    if missing:
        pytest.skip(_not_cached(f"vLLM {', '.join(missing)} sources"))
    return {version: path for version, path in files.items() if path is not None}


#: The key under which the release test's report carries the releases the clamp has not studied; the
#: session summary (tests/conftest.py, which the controller of ``pytest -n`` loads too) lists them.
UNTESTED_KEY = "untested_vllm_releases"


@pytest.fixture
def untested_vllm_releases(request: pytest.FixtureRequest) -> list[str]:
    """Filled by the release test; printed in the session summary rather than failing."""
    found: list[str] = []
    request.node.user_properties.append((UNTESTED_KEY, found))
    return found


@pytest.fixture(scope="session")
def released_vllm_versions() -> list[str]:
    """Every release from 0.26.0 on, as the package index listed them when the cache was filled."""
    versions = SOURCES.cached_released_versions()
    if versions is None:
        pytest.skip(_not_cached("the list of vLLM releases"))
    return list(versions)


def installed_copy(source: Path, version: str, site: Path) -> Path:
    """``source`` where a pip install of vLLM ``version`` puts it, with the package and dist-info around it
    (what ``turing apply --file`` reads the version from)."""
    target = site / "vllm" / "v1" / "attention" / "ops" / "triton_unified_attention.py"
    target.parent.mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    dist_info = site / f"vllm-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    target.write_bytes(source.read_bytes())
    return target


@pytest.fixture(params=TESTED_VLLM_VERSIONS)
def kernel_copy(request: pytest.FixtureRequest, vllm_kernel_files: dict[str, Path], tmp_path: Path) -> Path:
    """A writable copy of one release's real file, installed as pip installs it."""
    return installed_copy(vllm_kernel_files[request.param], request.param, tmp_path / "site-packages")
