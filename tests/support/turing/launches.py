"""Kernel launches the turing tests compile or count, built once."""

from __future__ import annotations

from gemmaserve.turing.kernel_compile import LaunchSpec


def e2b_global_launch(tile: int, warps: int, *, stages: int = 3) -> LaunchSpec:
    """Gemma 4 E2B's global layer: head 512, 2D, no window, 8 query heads on one KV head."""
    return LaunchSpec(
        head_size=512,
        tile_size=tile,
        is_3d=False,
        sliding_window=0,
        num_query_heads=8,
        num_queries_per_kv=8,
        num_warps=warps,
        num_stages=stages,
    )
