"""A real interpreter whose import path holds a vLLM package made of the real kernel file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def fake_interpreter(
    tmp_path: Path, kernel: Path, version: str, *, with_site_packages: bool = True, distribution: str = "vllm"
) -> Path:
    """A wrapper script around this Python; without site-packages it has no gemmaserve and no entry points."""
    site = tmp_path / "site"
    ops = site / "vllm" / "v1" / "attention" / "ops"
    ops.mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("raise ImportError('probing must not import vllm')\n")
    (ops / "triton_unified_attention.py").write_bytes(kernel.read_bytes())
    dist = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (dist / "top_level.txt").write_text("vllm\n")
    script = tmp_path / "python"
    flags = "" if with_site_packages else " -S"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable}{flags} "$@"\n')
    script.chmod(0o755)
    return script


class FakeQuery:
    """The query tensor as the launch wrapper reads it: only its element size."""

    def __init__(self, element_size: int) -> None:
        self.size = element_size

    def element_size(self) -> int:
        return self.size


def launch_unified_attention(
    kernel: Any, head: int, tile: int, is_3d: bool, *, window: int = 0, per_kv: int = 8, element_size: int = 2,
    **extra: Any,
) -> None:  # fmt: skip
    """One launch of ``kernel`` with the keyword arguments ``unified_attention`` gives it (BLOCK_M 16)."""
    kernel[(1, 1)](
        HEAD_SIZE=head,
        HEAD_SIZE_PADDED=head,
        TILE_SIZE=tile,
        BLOCK_M=16,
        IS_3D=is_3d,
        SLIDING_WINDOW=window,
        num_queries_per_kv=per_kv,
        query_ptr=FakeQuery(element_size),
        **extra,
    )
