"""Which gemmaserve modules one traced SageMaker deploy crosses, in the order it first enters each.

Runs ``tests/integration/sagemaker/test_cli.py::test_deploy_status_list_delete_through_the_cli`` against moto's
server and records, with :func:`sys.setprofile`, each gemmaserve module the first time one of its functions
runs during the test's first command (the deploy). Every gemmaserve module is imported before the command,
so import-time code is not counted. Prints one line per module (module, first function), then the totals::

    PYTHONPATH=src python tools/trace_modules.py
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

TEST = "tests/integration/sagemaker/test_cli.py::test_deploy_status_list_delete_through_the_cli"
ROOT = Path(__file__).resolve().parent.parent


def import_everything() -> None:
    """Import each gemmaserve module now, so the trace sees only calls, not import-time code."""
    import gemmaserve

    for info in pkgutil.walk_packages(gemmaserve.__path__, "gemmaserve."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception:
            continue


class Tracer:
    def __init__(self) -> None:
        self.first: dict[str, str] = {}

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("gemmaserve") or module in self.first:
            return
        if frame.f_code.co_name == "<module>":
            return
        self.first[module] = frame.f_code.co_name


class Plugin:
    """Wrap the test module's ``run`` helper so only its first call (the deploy command) is traced."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        import_everything()
        module = item.module  # type: ignore[attr-defined]
        original: Callable[..., Any] = module.run
        calls = []

        def traced(*args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            if len(calls) > 1:
                return original(*args, **kwargs)
            sys.setprofile(self.tracer.profile)
            try:
                return original(*args, **kwargs)
            finally:
                sys.setprofile(None)

        module.run = traced


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    tracer = Tracer()
    code = pytest.main(
        ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", str(ROOT / TEST)], plugins=[Plugin(tracer)]
    )
    if code != 0:
        print(f"the traced test failed (pytest exit {code}); the list below is partial", file=sys.stderr)
    # the tracer's own frames and the test helpers are not gemmaserve modules
    for module, function in tracer.first.items():
        print(f"{module.removeprefix('gemmaserve.') or 'gemmaserve'}  ({function})")
    sagemaker = [m for m in tracer.first if m.startswith("gemmaserve.sagemaker")]
    print(f"\n{len(tracer.first)} gemmaserve modules, {len(sagemaker)} of them in sagemaker/")
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main())
