"""The fenced block that the file patch inserts after vLLM's ``_get_tile_size``; pure text.

The block carries the rule's own source (``rule.clamp_tile_size`` and ``rule.launch_num_warps``,
builtins only), a wrapper of ``_get_tile_size`` and one of ``kernel_unified_attention`` (both looked
up by name at call time by ``unified_attention``; on sm >= 80 both hand over stock values), so a patched
file clamps without gemmaserve installed, and the sha256 of the file before the patch so that
verify and revert can tell a hand edit from our edit.
"""

from __future__ import annotations

import inspect
import re

from gemmaserve.turing import rule

BLOCK_FORMAT = 1
BEGIN_PREFIX = "# >>> gemmaserve-turing-clamp"
END_LINE = "# <<< gemmaserve-turing-clamp <<<\n"
#: What precedes the begin marker in the file, so removing ``LEAD + block`` restores the original.
LEAD = "\n\n"
_BEGIN = re.compile(r"# >>> gemmaserve-turing-clamp format=(\d+) original-sha256=([0-9a-f]{64}) >>>\n")

_DEVICE_AND_WRAPPER = '''

_gemmaserve_device_cache = {}


def _gemmaserve_device():
    """(major capability, opt-in shared memory per block) of the current CUDA device, cached per device."""
    import torch

    index = torch.cuda.current_device()
    if index not in _gemmaserve_device_cache:
        props = torch.cuda.get_device_properties(index)
        limit = getattr(props, "shared_memory_per_block_optin", None)
        if limit is None:  # older torch: ask Triton's driver, which the kernel launches through anyway
            from triton.runtime import driver

            limit = driver.active.utils.get_device_properties(index)["max_shared_mem"]
        _gemmaserve_device_cache[index] = (props.major, int(limit))
    return _gemmaserve_device_cache[index]


_gemmaserve_stock_get_tile_size = _get_tile_size


def _get_tile_size(head_size, sliding_window, element_size, is_prefill):
    """vLLM's tile, clamped on pre-Ampere GPUs to fit shared memory (gemmaserve turing clamp)."""
    tile = _gemmaserve_stock_get_tile_size(head_size, sliding_window, element_size, is_prefill)
    major, smem_limit_bytes = _gemmaserve_device()
    head_size_padded = 1 << (head_size - 1).bit_length()
    return _gemmaserve_clamp_tile_size(major, smem_limit_bytes, head_size_padded, element_size, tile,
                                       block_m=BLOCK_M_ASSUMED, margin_bytes=MARGIN_BYTES)


class _GemmaserveLaunch:
    """vLLM's kernel, launched with the rule's num_warps where its own tile overflows (gemmaserve turing clamp)."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        launcher = self.kernel[grid]

        def launch(*args, **kwargs):
            if "num_warps" not in kwargs:
                major, smem_limit_bytes = _gemmaserve_device()
                element_size = kwargs["query_ptr"].element_size()
                is_3d = bool(kwargs["IS_3D"])
                # vLLM's own tile for this grid: the 2D launch reads the prefill tile, 3D the decode one.
                stock_tile = _gemmaserve_stock_get_tile_size(
                    kwargs["HEAD_SIZE"], kwargs["SLIDING_WINDOW"], element_size, not is_3d)
                warps = _gemmaserve_launch_num_warps(
                    major, smem_limit_bytes, kwargs["HEAD_SIZE_PADDED"], stock_tile, kwargs["TILE_SIZE"],
                    kwargs["BLOCK_M"], kwargs["num_queries_per_kv"], kwargs["SLIDING_WINDOW"], is_3d,
                    element_size, STOCK_NUM_WARPS, MARGIN_BYTES)
                if warps != STOCK_NUM_WARPS:
                    kwargs["num_warps"] = warps
            return launcher(*args, **kwargs)

        return launch

    def __getattr__(self, name):
        return getattr(self.kernel, name)


kernel_unified_attention = _GemmaserveLaunch(kernel_unified_attention)
'''


def begin_line(original_sha256: str) -> str:
    return f"{BEGIN_PREFIX} format={BLOCK_FORMAT} original-sha256={original_sha256} >>>\n"


def render_block(original_sha256: str) -> str:
    """The whole block, from its begin marker to its end marker (each line ending in a newline)."""
    rule_source = inspect.getsource(rule.clamp_tile_size).replace(
        "def clamp_tile_size(", "def _gemmaserve_clamp_tile_size(", 1
    )
    warps_source = inspect.getsource(rule.launch_num_warps).replace(
        "def launch_num_warps(", "def _gemmaserve_launch_num_warps(", 1
    )
    wrapper = (
        _DEVICE_AND_WRAPPER.replace("BLOCK_M_ASSUMED", str(rule.DEFAULT_BLOCK_M))
        .replace("MARGIN_BYTES", str(rule.SMEM_MARGIN_BYTES))
        .replace("STOCK_NUM_WARPS", str(rule.STOCK_NUM_WARPS))
    )
    return (
        begin_line(original_sha256)
        + "# Added by `gemmaserve turing apply`; undo with `gemmaserve turing revert`. Do not edit.\n"
        + rule_source
        + "\n\n"
        + warps_source
        + wrapper
        + END_LINE
    )


def find_blocks(text: str) -> list[tuple[int, int, str]]:
    """Each block as (start offset including LEAD, end offset, recorded original sha256 or '')."""
    blocks: list[tuple[int, int, str]] = []
    position = 0
    while (start := text.find(BEGIN_PREFIX, position)) >= 0:
        end = text.find(END_LINE, start)
        end = len(text) if end < 0 else end + len(END_LINE)
        match = _BEGIN.match(text, start)
        lead_start = start - len(LEAD) if text[max(0, start - len(LEAD)) : start] == LEAD else start
        blocks.append((lead_start, end, match[2] if match else ""))
        position = end
    return blocks
