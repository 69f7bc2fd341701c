"""The tile rule against the compiler-measured figures and a brute-force search over every launch."""

from __future__ import annotations

import itertools

import pytest

from gemmaserve.turing.rule import (
    MIN_TILE_SIZE,
    LaunchParams,
    choose_launch,
    clamp_tile_size,
    kernel_smem_bytes,
)

OPTIN_SM75 = 65_536
CAPABILITIES = [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]
HEADS = [64, 128, 256, 512, 1024]
TILES = [16, 32, 64, 128]
ELEMENT_SIZES = [1, 2, 4]
BLOCK_MS = [16, 32, 64]
LIMITS = [49_152, 65_536, 98_304, 101_376]


@pytest.mark.parametrize(("head", "tile", "expected"), [
    (512, 32, 98_304), (512, 16, 65_536), (256, 32, 49_152), (256, 16, 32_768)])
def test_model_matches_the_compiler_on_sm75_fp16(head: int, tile: int, expected: int) -> None:
    assert kernel_smem_bytes(head, tile, 16, 2) == expected


def test_gemma4_global_layer_on_t4_is_clamped_to_exactly_the_limit() -> None:
    choice = choose_launch(capability=(7, 5), smem_limit_bytes=OPTIN_SM75, head_size_padded=512, element_size=2,
                           block_size=16, stock=LaunchParams(tile_size=32, block_m=16, num_stages=3))
    assert choice.changed and choice.fits
    assert choice.launch == LaunchParams(tile_size=16, block_m=16, num_stages=3)
    assert choice.smem_bytes == OPTIN_SM75  # the opt-in limit is inclusive


@pytest.mark.parametrize("capability", [(8, 0), (8, 9), (9, 0)])
def test_ampere_and_newer_keep_the_stock_launch_even_when_the_model_would_not_fit(
        capability: tuple[int, int]) -> None:
    stock = LaunchParams(tile_size=32, block_m=16, num_stages=2)
    choice = choose_launch(capability=capability, smem_limit_bytes=1, head_size_padded=512, element_size=2,
                           block_size=16, stock=stock)
    assert choice.launch == stock and not choice.changed and choice.smem_bytes is None


def _brute_force(capability: tuple[int, int], limit: int, head: int, element: int, stock: LaunchParams) -> int | None:
    """The largest tile <= stock, >= 16, whose modelled need fits; None if none does."""
    if capability[0] >= 8:
        return stock.tile_size
    fitting = [t for t in (2 ** k for k in range(4, 12)) if t <= stock.tile_size
               and 2 * element * head * (t + stock.block_m) <= limit]
    return max(fitting) if fitting else None


@pytest.mark.parametrize(("capability", "limit", "head", "element", "block_m"),
                         list(itertools.product(CAPABILITIES, LIMITS, HEADS, ELEMENT_SIZES, BLOCK_MS)))
def test_rule_equals_brute_force_for_every_stock_tile(capability: tuple[int, int], limit: int, head: int,
                                                      element: int, block_m: int) -> None:
    for tile, stages in itertools.product(TILES, (1, 2, 3)):
        stock = LaunchParams(tile_size=tile, block_m=block_m, num_stages=stages)
        choice = choose_launch(capability=capability, smem_limit_bytes=limit, head_size_padded=head,
                               element_size=element, block_size=16, stock=stock)
        best = _brute_force(capability, limit, head, element, stock)
        embedded = clamp_tile_size(capability[0], limit, head, element, tile, block_m)
        if best is None:
            assert not choice.fits and choice.launch == stock
            assert embedded == MIN_TILE_SIZE
            continue
        assert choice.fits
        assert choice.launch.tile_size == best == embedded
        assert choice.launch.block_m == block_m and choice.launch.num_stages == stages
        assert choice.changed == (best != tile)
        if choice.smem_bytes is not None:
            assert choice.smem_bytes <= limit


def test_margin_is_honoured() -> None:
    stock = LaunchParams(tile_size=32, block_m=16, num_stages=1)
    choice = choose_launch(capability=(7, 5), smem_limit_bytes=OPTIN_SM75, head_size_padded=512, element_size=2,
                           block_size=16, stock=stock, margin_bytes=1)
    assert not choice.fits  # tile 16 needs exactly the limit, nothing is left for a margin
    assert clamp_tile_size(7, OPTIN_SM75, 512, 2, 32, 16, margin_bytes=1) == MIN_TILE_SIZE


@pytest.mark.parametrize(("head", "tile", "block_m", "element"),
                         [(384, 32, 16, 2), (512, 24, 16, 2), (512, 32, 12, 2), (512, 32, 16, 3), (0, 32, 16, 2)])
def test_impossible_inputs_are_refused(head: int, tile: int, block_m: int, element: int) -> None:
    with pytest.raises(ValueError):
        choose_launch(capability=(7, 5), smem_limit_bytes=OPTIN_SM75, head_size_padded=head, element_size=element,
                      block_size=16, stock=LaunchParams(tile_size=tile, block_m=block_m, num_stages=1))
