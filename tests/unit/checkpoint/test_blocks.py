from __future__ import annotations

import threading
import time

import pytest

from gemmaserve.checkpoint import grid
from gemmaserve.checkpoint.blocks import map_in_order, row_blocks
from gemmaserve.errors import MissingExtra


def test_blocks_cover_the_rows() -> None:
    assert row_blocks(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert row_blocks(0, 4) == []


def test_results_come_back_in_order_from_several_threads() -> None:
    seen: set[str] = set()

    def work(i: int) -> int:
        seen.add(threading.current_thread().name)
        time.sleep(0.002 * (5 - i % 5))  # later items finish first
        return i * i

    assert list(map_in_order(work, range(20), workers=3)) == [i * i for i in range(20)]
    assert len(seen) > 1


def test_the_first_error_in_order_is_raised_and_later_work_is_not_started() -> None:
    started: list[int] = []

    def work(i: int) -> int:
        started.append(i)
        if i in (3, 5):
            raise ValueError(f"block {i}")
        return i

    got = []
    with pytest.raises(ValueError, match="block 3"):
        for value in map_in_order(work, range(100), workers=2):
            got.append(value)
    assert got == [0, 1, 2]
    assert max(started) < 10  # at most workers + 1 blocks ahead


def test_asking_for_numba_without_it_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grid, "_import_kernels", lambda: None)
    monkeypatch.setattr(grid, "_load_native", lambda: None)  # without numba nothing builds the cached object
    monkeypatch.setenv(grid.KERNEL_ENV, "numba")
    with pytest.raises(MissingExtra) as info:
        grid.kernels()
    assert info.value.hint == 'pip install "gemmaserve[numba]"'
    monkeypatch.setenv(grid.KERNEL_ENV, "auto")
    assert grid.kernels() is None and grid.kernel_name() == "numpy"
