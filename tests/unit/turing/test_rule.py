"""The tile rule against the compiler-measured figures and a brute-force search over every launch."""

from __future__ import annotations

import itertools

import pytest

from gemmaserve.turing.rule import (
    MIN_TILE_SIZE,
    STOCK_NUM_WARPS,
    LaunchParams,
    LaunchShape,
    MeasuredLaunch,
    SmemDevice,
    block_m_for,
    choose_launch,
    clamp_tile_size,
    kernel_smem_bytes,
    launch_num_warps,
    pick_launch,
    warps_table,
)

OPTIN_SM75 = 65_536
CAPABILITIES = [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]
HEADS = [64, 128, 256, 512, 1024]
TILES = [16, 32, 64, 128]
ELEMENT_SIZES = [1, 2, 4]
BLOCK_MS = [16, 32, 64]
LIMITS = [49_152, 65_536, 98_304, 101_376]


@pytest.mark.parametrize(
    ("head", "tile", "expected"), [(512, 32, 98_304), (512, 16, 65_536), (256, 32, 49_152), (256, 16, 32_768)]
)
def test_model_matches_the_compiler_on_sm75_fp16(head: int, tile: int, expected: int) -> None:
    assert kernel_smem_bytes(head, tile, 16, 2) == expected


def test_gemma4_global_layer_on_t4_is_clamped_to_exactly_the_limit() -> None:
    choice = choose_launch(
        SmemDevice(capability=(7, 5), smem_limit_bytes=OPTIN_SM75),
        LaunchShape(head_size_padded=512, element_size=2, num_queries_per_kv=8, block_size=16),
        LaunchParams(tile_size=32, block_m=16, num_stages=3),
    )
    assert choice.changed and choice.fits
    assert choice.launch == LaunchParams(tile_size=16, block_m=16, num_stages=3, num_warps=8)
    assert choice.smem_bytes == OPTIN_SM75  # the opt-in limit is inclusive


@pytest.mark.parametrize("capability", [(8, 0), (8, 9), (9, 0)])
def test_ampere_and_newer_keep_the_stock_launch_even_when_the_model_would_not_fit(capability: tuple[int, int]) -> None:
    stock = LaunchParams(tile_size=32, block_m=16, num_stages=2)
    choice = choose_launch(
        SmemDevice(capability=capability, smem_limit_bytes=1),
        LaunchShape(head_size_padded=512, element_size=2, num_queries_per_kv=8, block_size=16),
        stock,
    )
    assert choice.launch == stock and not choice.changed and choice.smem_bytes is None


def _brute_force(capability: tuple[int, int], limit: int, head: int, element: int, stock: LaunchParams) -> int | None:
    """The largest tile <= stock, >= 16, whose modelled need fits; None if none does."""
    if capability[0] >= 8:
        return stock.tile_size
    fitting = [
        t
        for t in (2**k for k in range(4, 12))
        if t <= stock.tile_size and 2 * element * head * (t + stock.block_m) <= limit
    ]
    return max(fitting) if fitting else None


@pytest.mark.parametrize(
    ("capability", "limit", "head", "element", "block_m"),
    list(itertools.product(CAPABILITIES, LIMITS, HEADS, ELEMENT_SIZES, BLOCK_MS)),
)
def test_rule_equals_brute_force_for_every_stock_tile(
    capability: tuple[int, int], limit: int, head: int, element: int, block_m: int
) -> None:
    for tile, stages in itertools.product(TILES, (1, 2, 3)):
        stock = LaunchParams(tile_size=tile, block_m=block_m, num_stages=stages)
        choice = choose_launch(
            SmemDevice(capability=capability, smem_limit_bytes=limit),
            LaunchShape(head_size_padded=head, element_size=element, num_queries_per_kv=8, block_size=16),
            stock,
        )
        best = _brute_force(capability, limit, head, element, stock)
        embedded = clamp_tile_size(capability[0], limit, head, element, tile, block_m)
        if best is None:
            assert not choice.fits and choice.launch == stock
            assert embedded == MIN_TILE_SIZE
            continue
        assert choice.fits
        assert choice.launch.tile_size == best == embedded
        assert choice.launch.block_m == block_m and choice.launch.num_stages == stages
        assert choice.launch.num_warps == launch_num_warps(
            capability[0], limit, head, tile, best, block_m, 8, 0, False, element, STOCK_NUM_WARPS
        )
        assert choice.changed == (choice.launch != stock)
        if choice.smem_bytes is not None:
            assert choice.smem_bytes <= limit


def test_margin_is_honoured() -> None:
    stock = LaunchParams(tile_size=32, block_m=16, num_stages=1)
    choice = choose_launch(
        SmemDevice(capability=(7, 5), smem_limit_bytes=OPTIN_SM75, margin_bytes=1),
        LaunchShape(head_size_padded=512, element_size=2, num_queries_per_kv=8, block_size=16),
        stock,
    )
    assert not choice.fits  # tile 16 needs exactly the limit, nothing is left for a margin
    assert clamp_tile_size(7, OPTIN_SM75, 512, 2, 32, 16, margin_bytes=1) == MIN_TILE_SIZE


@pytest.mark.parametrize(
    ("head", "tile", "block_m", "element", "warps"),
    [
        (384, 32, 16, 2, 4),
        (512, 24, 16, 2, 4),
        (512, 32, 12, 2, 4),
        (512, 32, 16, 3, 4),
        (0, 32, 16, 2, 4),
        (512, 32, 16, 2, 3),
        (512, 32, 16, 2, 0),
    ],
)
def test_impossible_inputs_are_refused(head: int, tile: int, block_m: int, element: int, warps: int) -> None:
    with pytest.raises(ValueError):
        choose_launch(
            SmemDevice(capability=(7, 5), smem_limit_bytes=OPTIN_SM75),
            LaunchShape(head_size_padded=head, element_size=element, num_queries_per_kv=8, block_size=16),
            LaunchParams(tile_size=tile, block_m=block_m, num_stages=1, num_warps=warps),
        )


#: (major, minor): opt-in shared memory per block (CUDA C++ Programming Guide, compute capabilities).
OPTIN_BY_CAPABILITY = {
    (7, 0): 98_304,
    (7, 5): 65_536,
    (8, 0): 166_912,
    (8, 6): 101_376,
    (8, 9): 101_376,
    (9, 0): 232_448,
}


def fp16_shape(head: int, per_kv: int, window: int, is_3d: bool) -> LaunchShape:
    """A 16-bit launch on vLLM's 16-token blocks, as the warps table keys it."""
    return LaunchShape(
        head_size_padded=head,
        element_size=2,
        num_queries_per_kv=per_kv,
        block_size=16,
        sliding_window=window,
        is_3d=is_3d,
    )


@pytest.mark.parametrize("capability", list(OPTIN_BY_CAPABILITY))
@pytest.mark.parametrize(("key", "warps"), list(warps_table().items()))
def test_every_table_launch_changes_only_where_vllms_own_launch_overflows(
    capability: tuple[int, int], key: tuple[int, int, int, int, int, bool], warps: int
) -> None:
    head, tile, block_m, per_kv, window, is_3d = key
    limit = OPTIN_BY_CAPABILITY[capability]
    for stock_tile in (16, 32, 64, 128):
        stock = LaunchParams(tile_size=stock_tile, block_m=block_m, num_stages=3)
        choice = choose_launch(
            SmemDevice(capability=capability, smem_limit_bytes=limit),
            fp16_shape(head, per_kv, window, is_3d),
            stock,
        )
        where = (capability, stock_tile, choice.reason)
        if capability[0] >= 8 or kernel_smem_bytes(head, stock_tile, block_m, 2) <= limit:
            assert choice.launch == stock and not choice.changed, where  # byte-identical to vLLM's choice
        elif choice.launch.tile_size == tile and choice.fits:
            assert choice.launch.num_warps == warps and choice.changed, where
        else:
            assert choice.launch.num_warps == STOCK_NUM_WARPS, where


def test_on_a_v100_no_gemma4_launch_changes() -> None:
    """sm_70 allows 98,304 B: vLLM's head-512 tile 32 fits there, so nothing is clamped, warps included."""
    for head, stock_tile, per_kv, window, is_3d in itertools.product(
        (256, 512), (16, 32), (2, 4, 8, 16), (0, 512, 1024), (False, True)
    ):
        stock = LaunchParams(tile_size=stock_tile, block_m=16, num_stages=3)
        choice = choose_launch(
            SmemDevice(capability=(7, 0), smem_limit_bytes=98_304),
            fp16_shape(head, per_kv, window, is_3d),
            stock,
        )
        assert choice.launch == stock and not choice.changed, choice.reason


@pytest.mark.parametrize(
    ("major", "head", "tile", "block_m", "is_3d", "element", "stock_warps"),
    list(
        itertools.product([6, 7, 8, 9, 10, 12], HEADS, [16, 32, 64], BLOCK_MS, [False, True], ELEMENT_SIZES, [2, 4, 8])
    ),
)
def test_warps_change_only_before_ampere_for_tabled_16_bit_launches_that_overflow(
    major: int, head: int, tile: int, block_m: int, is_3d: bool, element: int, stock_warps: int
) -> None:
    table = warps_table()
    for per_kv, window, stock_tile in itertools.product((1, 2, 8, 16), (0, 1024), (tile, 2 * tile)):
        warps = launch_num_warps(
            major, OPTIN_SM75, head, stock_tile, tile, block_m, per_kv, window, is_3d, element, stock_warps
        )
        key = (head, tile, block_m, per_kv, window, is_3d)
        overflows = kernel_smem_bytes(head, stock_tile, block_m, element) > OPTIN_SM75
        if major != 7 or element != 2 or key not in table or stock_warps != STOCK_NUM_WARPS or not overflows:
            assert warps == stock_warps
        else:
            assert warps == table[key]


@pytest.mark.parametrize("is_3d", [False, True])
def test_choice_on_t4_for_both_gemma4_layer_kinds(is_3d: bool) -> None:
    t4 = SmemDevice(capability=(7, 5), smem_limit_bytes=OPTIN_SM75)
    stock_tile = 32 if not is_3d else 16
    stock = LaunchParams(tile_size=stock_tile, block_m=16, num_stages=3)
    glob = choose_launch(
        t4, LaunchShape(head_size_padded=512, element_size=2, num_queries_per_kv=8, is_3d=is_3d), stock
    )
    if is_3d:  # vLLM's decode tile 16 needs exactly the limit: its launch stays as it is
        assert glob.launch == stock and not glob.changed
    else:
        assert glob.launch == LaunchParams(tile_size=16, block_m=16, num_stages=3, num_warps=8)
        assert glob.changed and glob.smem_bytes == OPTIN_SM75
    for per_kv, window in ((8, 512), (4, 512), (2, 1024)):
        shape = LaunchShape(
            head_size_padded=256, element_size=2, num_queries_per_kv=per_kv, sliding_window=window, is_3d=is_3d
        )
        sliding = choose_launch(t4, shape, stock)
        assert sliding.launch == stock and not sliding.changed  # 49,152 B or less: fits, untouched
    l4 = t4.model_copy(update={"capability": (8, 9)})
    on_l4 = choose_launch(
        l4, LaunchShape(head_size_padded=512, element_size=2, num_queries_per_kv=8, is_3d=is_3d), stock
    )
    assert on_l4.launch.num_warps == STOCK_NUM_WARPS and not on_l4.changed


@pytest.mark.parametrize(("capability", "element"), [((7, 5), 4), ((6, 0), 2), ((8, 9), 2)])
def test_the_reason_names_warps_only_where_they_change(capability: tuple[int, int], element: int) -> None:
    choice = choose_launch(
        SmemDevice(capability=capability, smem_limit_bytes=49_152 if capability[0] == 6 else OPTIN_SM75),
        LaunchShape(
            head_size_padded=512 if element == 2 else 256, element_size=element, num_queries_per_kv=8, block_size=16
        ),
        LaunchParams(tile_size=32, block_m=16, num_stages=3),
    )
    assert choice.launch.num_warps == STOCK_NUM_WARPS and "num_warps" not in choice.reason


def test_the_pick_is_vllms_own_launch_wherever_it_fits() -> None:
    stock = LaunchParams(tile_size=32, block_m=16, num_stages=3)
    cheaper = LaunchParams(tile_size=32, block_m=16, num_stages=3, num_warps=8)
    candidates = [
        MeasuredLaunch(launch=stock, smem_bytes=49_152, spill_bytes=1_216),
        MeasuredLaunch(launch=cheaper, smem_bytes=49_152, spill_bytes=0),
    ]
    assert pick_launch(candidates, smem_limit_bytes=OPTIN_SM75, stock=stock) == candidates[0]
    assert pick_launch(candidates, smem_limit_bytes=32_768, stock=stock) is None


def test_block_m_follows_vllms_launcher() -> None:
    assert [block_m_for(n) for n in (1, 2, 8, 16, 17, 32, 48)] == [16, 16, 16, 16, 32, 32, 64]


def test_every_delivery_reads_as_words() -> None:
    from gemmaserve.turing.status import CLAMPED_BY, Delivery

    assert set(CLAMPED_BY) == set(Delivery)
    assert CLAMPED_BY[Delivery.BOTH] == "the plugin and the file patch"  # never "clamped by the both"
