"""The pure tile rule: which TILE_SIZE / BLOCK_M / num_stages the unified-attention kernel may use.

No I/O. ``kernel_smem_bytes`` and ``clamp_tile_size`` use builtins only, because the file patch
embeds their source verbatim in the vLLM file (one rule, two deliveries). The shared-memory model
was fitted to Triton's own compile of the real kernel for sm_75 (see smem.py and docs/turing.md).
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from pydantic import BaseModel, ConfigDict

#: Bytes kept free under the device limit. Zero, because the model equals what the compiler
#: allocates (checked by ``gemmaserve turing smem``) and the opt-in limit is inclusive: Triton
#: launches a kernel whose shared memory is exactly ``shared_memory_per_block_optin``.
SMEM_MARGIN_BYTES = 0
#: The kernel's ``tl.dot`` needs at least 16 along the KV tile; tile 8 does not compile.
MIN_TILE_SIZE = 16
#: First compute capability (major) with asynchronous copies, whose smem grows with stages.
AMPERE_MAJOR = 8
#: BLOCK_M that ``unified_attention`` uses when at most 16 query heads share a KV head
#: (every Gemma 4 model); ``_get_tile_size`` is not told BLOCK_M, so the wrapper assumes it.
DEFAULT_BLOCK_M = 16
#: Triton's default num_warps, which ``unified_attention`` launches with (it passes none of its own
#: except on its tuned sm_100 path).
STOCK_NUM_WARPS = 4


def kernel_smem_bytes(head_size_padded: int, tile_size: int, block_m: int, element_size: int) -> int:
    """Shared memory of one unified-attention block below sm_80 (no pipelining, so no stages term)."""
    return 2 * element_size * head_size_padded * (tile_size + block_m)


# ``clamp_tile_size`` and ``launch_num_warps`` take flat builtins on purpose: ``block.py`` embeds their source
# verbatim in vLLM's file, where neither gemmaserve nor pydantic can be imported, and calls them there with
# the kernel's own keyword arguments. Python callers group their inputs (``SmemDevice``, ``LaunchShape``) and go
# through ``choose_launch``.
def clamp_tile_size(
    capability_major: int,
    smem_limit_bytes: int,
    head_size_padded: int,
    element_size: int,
    stock_tile: int,
    block_m: int = 16,
    margin_bytes: int = 0,
    min_tile: int = 16,
) -> int:
    """The stock tile on sm >= 80 or when it fits; else the largest power-of-two tile that fits.

    Never returns a tile larger than the stock one (so a BLOCK_SIZE % TILE_SIZE == 0 constraint that
    held for stock still holds), nor one below ``min_tile``: when even that does not fit, returns
    ``min_tile`` and the caller must treat the launch as not fitting.
    """
    if capability_major >= 8:
        return stock_tile
    budget = smem_limit_bytes - margin_bytes
    tile = stock_tile
    while tile > min_tile and 2 * element_size * head_size_padded * (tile + block_m) > budget:
        tile //= 2
    return max(tile, min(min_tile, stock_tile))


def launch_num_warps(
    capability_major: int,
    smem_limit_bytes: int,
    head_size_padded: int,
    stock_tile_size: int,
    tile_size: int,
    block_m: int,
    num_queries_per_kv: int,
    sliding_window: int,
    is_3d: bool,
    element_size: int,
    stock_num_warps: int = 4,
    margin_bytes: int = 0,
) -> int:
    """vLLM's num_warps for every launch that fits; the search's fewest-spill one where the clamp shrank the tile.

    Only a launch whose stock tile overflows shared memory before Ampere is changed, and only when the
    launch it becomes (tile, BLOCK_M, query heads per KV head, window, grid, element size) is one that
    ``gemmaserve turing smem --search`` compiled for sm_75 and found spilling least at other warps
    (the table; the test suite checks it against the search's committed output). Every launch that
    fits, every launch not in the table, every launch where vLLM chose its own warps (anything but
    Triton's default 4) and every GPU from sm_80 on keeps ``stock_num_warps``. Builtins only: the
    file patch embeds this source.
    """
    if capability_major != 7 or element_size != 2 or stock_num_warps != 4:
        return stock_num_warps
    if 2 * element_size * head_size_padded * (stock_tile_size + block_m) <= smem_limit_bytes - margin_bytes:
        return stock_num_warps  # vLLM's own launch fits: it stays exactly as vLLM chose it
    measured = {
        # (head_size_padded, tile_size, block_m, num_queries_per_kv, sliding_window, is_3d): num_warps
        (512, 16, 16, 4, 0, False): 8,
        (512, 16, 16, 8, 0, False): 8,
        (512, 16, 16, 16, 0, False): 8,
    }
    key = (head_size_padded, tile_size, block_m, num_queries_per_kv, sliding_window, is_3d)
    return measured.get(key, stock_num_warps)


def warps_table() -> dict[tuple[int, int, int, int, int, bool], int]:
    """The table inside ``launch_num_warps``, read from its source (it must stay builtins-only there)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(launch_num_warps)))
    table = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "measured" for target in node.targets)
    )
    found: dict[tuple[int, int, int, int, int, bool], int] = ast.literal_eval(table)
    return found


def block_m_for(num_queries_per_kv: int) -> int:
    """BLOCK_M as ``unified_attention`` sets it (vLLM 0.34.0 triton_unified_attention.py:1073-1075)."""
    return DEFAULT_BLOCK_M if num_queries_per_kv <= DEFAULT_BLOCK_M else next_power_of_2(num_queries_per_kv)


class LaunchParams(BaseModel):
    """What the kernel is launched with."""

    model_config = ConfigDict(frozen=True)

    tile_size: int
    block_m: int
    num_stages: int
    num_warps: int = STOCK_NUM_WARPS


class LaunchChoice(BaseModel):
    """The rule's answer: the launch to use, its modelled shared memory, and why."""

    model_config = ConfigDict(frozen=True)

    launch: LaunchParams
    stock: LaunchParams
    smem_bytes: int | None  # None on sm >= 80: the launch is stock and the model does not apply
    smem_limit_bytes: int
    margin_bytes: int
    changed: bool
    fits: bool
    reason: str


class MeasuredLaunch(BaseModel):
    """A candidate launch with what the compiler said of it (spill_bytes: stores + loads; None if unknown)."""

    model_config = ConfigDict(frozen=True)

    launch: LaunchParams
    smem_bytes: int
    spill_bytes: int | None


def pick_launch(
    candidates: list[MeasuredLaunch], *, smem_limit_bytes: int, stock: LaunchParams
) -> MeasuredLaunch | None:
    """vLLM's own launch when it fits; else the candidate that fits and spills least (ties: the larger
    tile, then stock warps, then fewer warps).

    None when no candidate with known spills fits. This is the order the search ranks the compiler's
    figures by; ``launch_num_warps`` holds its answers for sm_75.
    """
    own = next((c for c in candidates if c.launch == stock), None)
    if own is not None and own.smem_bytes <= smem_limit_bytes:
        return own
    known = [c for c in candidates if c.smem_bytes <= smem_limit_bytes and c.spill_bytes is not None]
    if not known:
        return None
    return min(
        known,
        key=lambda c: (
            c.spill_bytes,
            -c.launch.tile_size,
            c.launch.num_warps != stock.num_warps,
            c.launch.num_warps,
            c.launch != stock,
        ),
    )


def next_power_of_2(value: int) -> int:
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


class SmemDevice(BaseModel):
    """The GPU a launch is chosen for: its compute capability and the shared memory one block may opt into,
    less ``margin_bytes`` kept free."""

    model_config = ConfigDict(frozen=True)

    capability: tuple[int, int]
    smem_limit_bytes: int
    margin_bytes: int = SMEM_MARGIN_BYTES


class LaunchShape(BaseModel):
    """What the attention layer fixes of a launch: its padded head, element size, KV block size, query heads
    per KV head and window (two of the kernel's compile-time constants the measured warps depend on), and
    whether the grid is the split-KV decode one (3D)."""

    model_config = ConfigDict(frozen=True)

    head_size_padded: int
    element_size: int
    num_queries_per_kv: int
    block_size: int = 16
    sliding_window: int = 0
    is_3d: bool = False


def choose_launch(device: SmemDevice, shape: LaunchShape, stock: LaunchParams) -> LaunchChoice:
    """vLLM's launch, unchanged, on sm >= 80 and wherever it fits; else the largest tile that fits, then warps.

    The tile is ``clamp_tile_size``'s, num_warps is ``launch_num_warps``'s for the launch that tile
    makes (``num_queries_per_kv`` and ``sliding_window`` are two of the kernel's compile-time
    constants the measured warps depend on); BLOCK_M and stages stay stock (below sm_80 shared memory
    does not depend on stages, and BLOCK_M sets ``unified_attention``'s grid).

    Raises:
        ValueError: on inputs that no launch can have (non-power-of-two head or tile, sizes <= 0).
    """
    capability, smem_limit_bytes, margin_bytes = device.capability, device.smem_limit_bytes, device.margin_bytes
    head_size_padded, element_size, block_size = shape.head_size_padded, shape.element_size, shape.block_size
    num_queries_per_kv, sliding_window, is_3d = shape.num_queries_per_kv, shape.sliding_window, shape.is_3d
    _check_inputs(head_size_padded, element_size, block_size, stock, num_queries_per_kv)
    if capability[0] >= AMPERE_MAJOR:
        return LaunchChoice(
            launch=stock,
            smem_bytes=None,
            changed=False,
            fits=True,
            reason=f"sm_{capability[0]}{capability[1]} >= sm_80: stock launch, untouched",
            stock=stock,
            smem_limit_bytes=smem_limit_bytes,
            margin_bytes=margin_bytes,
        )
    budget = smem_limit_bytes - margin_bytes
    stock_need = kernel_smem_bytes(head_size_padded, stock.tile_size, stock.block_m, element_size)
    tile = clamp_tile_size(
        capability[0],
        smem_limit_bytes,
        head_size_padded,
        element_size,
        stock.tile_size,
        stock.block_m,
        margin_bytes,
        MIN_TILE_SIZE,
    )
    need = kernel_smem_bytes(head_size_padded, tile, stock.block_m, element_size)
    if need > budget:
        return LaunchChoice(
            launch=stock,
            smem_bytes=stock_need,
            changed=False,
            fits=False,
            reason=(
                f"no tile >= {MIN_TILE_SIZE} fits: tile {MIN_TILE_SIZE} needs "
                f"{kernel_smem_bytes(head_size_padded, MIN_TILE_SIZE, stock.block_m, element_size):,}"
                f" B > {budget:,} B"
            ),
            stock=stock,
            smem_limit_bytes=smem_limit_bytes,
            margin_bytes=margin_bytes,
        )
    warps = launch_num_warps(
        capability[0],
        smem_limit_bytes,
        head_size_padded,
        stock.tile_size,
        tile,
        stock.block_m,
        num_queries_per_kv,
        sliding_window,
        is_3d,
        element_size,
        stock.num_warps,
        margin_bytes,
    )
    launch = LaunchParams(tile_size=tile, block_m=stock.block_m, num_stages=stock.num_stages, num_warps=warps)
    parts = [
        f"stock tile {stock.tile_size} needs {stock_need:,} B {'<=' if stock_need <= budget else '>'} {budget:,} B"
    ]
    if tile != stock.tile_size:
        parts.append(f"tile {tile} needs {need:,} B")
    if warps != stock.num_warps:
        parts.append(f"num_warps {stock.num_warps} -> {warps} (fewest spills the sm_75 search measured)")
    return LaunchChoice(
        launch=launch,
        smem_bytes=need,
        changed=launch != stock,
        fits=True,
        reason="; ".join(parts),
        stock=stock,
        smem_limit_bytes=smem_limit_bytes,
        margin_bytes=margin_bytes,
    )


def _check_inputs(
    head_size_padded: int, element_size: int, block_size: int, stock: LaunchParams, num_queries_per_kv: int
) -> None:
    for name, value in (
        ("head_size_padded", head_size_padded),
        ("tile_size", stock.tile_size),
        ("block_m", stock.block_m),
    ):
        if value <= 0 or value & (value - 1):
            raise ValueError(f"{name} must be a positive power of two, not {value}")
    if element_size not in (1, 2, 4):
        raise ValueError(f"element_size must be 1, 2 or 4 bytes, not {element_size}")
    if num_queries_per_kv <= 0:
        raise ValueError(f"num_queries_per_kv must be positive, not {num_queries_per_kv}")
    if block_size <= 0 or stock.num_stages <= 0 or stock.num_warps <= 0 or stock.num_warps & (stock.num_warps - 1):
        raise ValueError("block_size and num_stages must be positive, num_warps a positive power of two")
