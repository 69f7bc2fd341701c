"""The tile rule against the compiler-measured figures and a brute-force search over every launch."""

from __future__ import annotations

import itertools

import pytest

from gemmaserve.turing.rule import (
    MIN_TILE_SIZE,
    STOCK_NUM_WARPS,
    LaunchParams,
    choose_launch,
    clamp_tile_size,
    kernel_smem_bytes,
    launch_num_warps,
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
        capability=(7, 5),
        smem_limit_bytes=OPTIN_SM75,
        head_size_padded=512,
        element_size=2,
        block_size=16,
        stock=LaunchParams(tile_size=32, block_m=16, num_stages=3),
    )
    assert choice.changed and choice.fits
    assert choice.launch == LaunchParams(tile_size=16, block_m=16, num_stages=3, num_warps=8)
    assert choice.smem_bytes == OPTIN_SM75  # the opt-in limit is inclusive


@pytest.mark.parametrize("capability", [(8, 0), (8, 9), (9, 0)])
def test_ampere_and_newer_keep_the_stock_launch_even_when_the_model_would_not_fit(capability: tuple[int, int]) -> None:
    stock = LaunchParams(tile_size=32, block_m=16, num_stages=2)
    choice = choose_launch(
        capability=capability, smem_limit_bytes=1, head_size_padded=512, element_size=2, block_size=16, stock=stock
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
            capability=capability,
            smem_limit_bytes=limit,
            head_size_padded=head,
            element_size=element,
            block_size=16,
            stock=stock,
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
            capability[0], head, best, block_m, False, element, STOCK_NUM_WARPS
        )
        assert choice.changed == (choice.launch != stock)
        if choice.smem_bytes is not None:
            assert choice.smem_bytes <= limit


def test_margin_is_honoured() -> None:
    stock = LaunchParams(tile_size=32, block_m=16, num_stages=1)
    choice = choose_launch(
        capability=(7, 5),
        smem_limit_bytes=OPTIN_SM75,
        head_size_padded=512,
        element_size=2,
        block_size=16,
        stock=stock,
        margin_bytes=1,
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
            capability=(7, 5),
            smem_limit_bytes=OPTIN_SM75,
            head_size_padded=head,
            element_size=element,
            block_size=16,
            stock=LaunchParams(tile_size=tile, block_m=block_m, num_stages=1, num_warps=warps),
        )


#: ptxas -v on Triton 3.9's compile of vLLM 0.26.0's kernel for sm_75, fp16, BLOCK_M 16, 3 stages
#: (`gemmaserve turing smem --search`): {(head, tile, is_3d): {num_warps: spill store + load bytes}}.
#: test_smem.py recompiles the entries; the rule must pick the fewest spills, stock warps on a tie.
SM75_SPILL_BYTES = {
    (512, 16, False): {4: 720 + 704, 8: 0, 16: 0},
    (512, 16, True): {4: 708 + 692, 8: 0, 16: 0},
    (256, 32, False): {4: 616 + 600, 8: 0, 16: 348 + 340},
    (256, 32, True): {4: 608 + 596, 8: 0},
    (256, 16, False): {4: 0, 8: 0, 16: 36 + 28},
    (256, 16, True): {4: 0, 8: 0, 16: 16 + 16},
}


def _fewest_spills(spills: dict[int, int]) -> int:
    return min(spills, key=lambda warps: (spills[warps], warps != STOCK_NUM_WARPS, warps))


@pytest.mark.parametrize(("key", "spills"), list(SM75_SPILL_BYTES.items()))
def test_warps_are_the_fewest_spills_the_compiler_measured(key: tuple[int, int, bool], spills: dict[int, int]) -> None:
    head, tile, is_3d = key
    assert launch_num_warps(7, head, tile, 16, is_3d, 2, STOCK_NUM_WARPS) == _fewest_spills(spills)


@pytest.mark.parametrize(
    ("major", "head", "tile", "block_m", "is_3d", "element", "stock_warps"),
    list(
        itertools.product([6, 7, 8, 9, 10, 12], HEADS, [16, 32, 64], BLOCK_MS, [False, True], ELEMENT_SIZES, [2, 4, 8])
    ),
)
def test_warps_change_only_before_ampere_for_measured_16_bit_launches(
    major: int, head: int, tile: int, block_m: int, is_3d: bool, element: int, stock_warps: int
) -> None:
    warps = launch_num_warps(major, head, tile, block_m, is_3d, element, stock_warps)
    measured = (head, tile, is_3d) in SM75_SPILL_BYTES and block_m == 16
    if major != 7 or element != 2 or not measured or stock_warps != STOCK_NUM_WARPS:
        assert warps == stock_warps
    else:
        assert warps == _fewest_spills(SM75_SPILL_BYTES[(head, tile, is_3d)])


@pytest.mark.parametrize("is_3d", [False, True])
def test_choice_on_t4_for_both_gemma4_layer_kinds(is_3d: bool) -> None:
    t4 = {"capability": (7, 5), "smem_limit_bytes": OPTIN_SM75, "element_size": 2, "block_size": 16, "is_3d": is_3d}
    stock_tile = 32 if not is_3d else 16
    glob = choose_launch(head_size_padded=512, stock=LaunchParams(tile_size=stock_tile, block_m=16, num_stages=3), **t4)  # type: ignore[arg-type]
    assert glob.launch == LaunchParams(tile_size=16, block_m=16, num_stages=3, num_warps=8)
    assert glob.changed and glob.smem_bytes == OPTIN_SM75
    sliding = choose_launch(
        head_size_padded=256, stock=LaunchParams(tile_size=stock_tile, block_m=16, num_stages=3), **t4
    )  # type: ignore[arg-type]
    assert sliding.launch.tile_size == stock_tile
    assert sliding.launch.num_warps == (8 if stock_tile == 32 else 4)
    on_l4 = choose_launch(
        head_size_padded=512,
        stock=LaunchParams(tile_size=stock_tile, block_m=16, num_stages=3),
        **{**t4, "capability": (8, 9)},
    )  # type: ignore[arg-type]
    assert on_l4.launch.num_warps == STOCK_NUM_WARPS and not on_l4.changed


def test_every_delivery_reads_as_words() -> None:
    from gemmaserve.turing.status import CLAMPED_BY, Delivery

    assert set(CLAMPED_BY) == set(Delivery)
    assert CLAMPED_BY[Delivery.BOTH] == "the plugin and the file patch"  # never "clamped by the both"
