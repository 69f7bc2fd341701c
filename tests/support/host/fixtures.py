"""Host-probe fixtures: captured outputs of real and broken installs, and fake binaries on a PATH."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from gemmaserve.host.gpu import GpuInfo, parse_gpu_csv
from gemmaserve.host.interpreter import InterpreterFacts, parse_probe_output
from gemmaserve.host.probed import Probed

DATA = Path(__file__).with_name("data")


def data_text(name: str) -> str:
    return (DATA / name).read_text()


def probe_facts(name: str) -> InterpreterFacts:
    return parse_probe_output(data_text(name))


def gpus_from(name: str) -> Probed[list[GpuInfo]]:
    return Probed[list[GpuInfo]](value=parse_gpu_csv(data_text(name)))


@pytest.fixture
def fake_bin(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write an executable shell script ``name`` into a private bin dir; returns its path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def write(name: str, body: str) -> Path:
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    return write
