"""Row blocks of a tensor processed on worker threads, results handed back in order.

The grid kernels (numba) and numpy's large operations release the GIL, and reads
(``os.preadv``, HTTP range requests) wait outside it, so a few threads keep both the
disk or network and every core busy. At most ``workers + 1`` blocks are in flight,
which bounds memory by the block size, not by the tensor or the checkpoint.
Progress callbacks and errors reach the caller in block order, on the caller's thread.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from gemmaserve.checkpoint.header import SafetensorsHeader, TensorEntry
from gemmaserve.checkpoint.sources import CheckpointSource, LocalSource
from gemmaserve.progress import CancelToken, ProgressCallback, ProgressEvent, check, report

T = TypeVar("T")
R = TypeVar("R")

THREADS_ENV = "GEMMASERVE_CHECKPOINT_THREADS"


def worker_count() -> int:
    """Threads for block work: GEMMASERVE_CHECKPOINT_THREADS, else the CPUs this process may run on, else
    one on the numpy path (its many small operations hold the GIL in turn: two threads ran slower than one)."""
    value = os.environ.get(THREADS_ENV, "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    from gemmaserve.checkpoint import grid

    if grid.kernels() is None:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def row_blocks(rows: int, rows_per_block: int) -> list[tuple[int, int]]:
    step = max(1, rows_per_block)
    return [(r0, min(rows, r0 + step)) for r0 in range(0, rows, step)]


def read_rows_reused(
    source: CheckpointSource, header: SafetensorsHeader, entry: TensorEntry, start: int, stop: int, name: str
) -> np.ndarray:
    """Rows of a tensor; from a local file, read into this thread's buffer ``name`` (valid until its next use
    on this thread): a fresh buffer per block costs a zero-fill and a page fault per 4 KiB, more than the read."""
    if not isinstance(source, LocalSource):
        return source.read_rows(header, entry, start, stop)
    from gemmaserve.checkpoint.grid import _scratch

    return source.read_rows_into(header, entry, start, stop, _scratch(name, (stop - start) * entry.row_bytes, np.uint8))


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    """One long-lived pool per size: its threads keep their scratch buffers (``grid._scratch``) from
    tensor to tensor, where fresh threads would fault fresh pages in for every tensor."""
    with _pools_lock:
        if workers not in _pools:
            _pools[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gemmaserve-block")
        return _pools[workers]


def submit(fn: Callable[..., R], *args: object) -> Future[R]:
    """``fn(*args)`` on the block threads (work that overlaps the blocks of the next tensor or shard)."""
    return _pool(max(2, worker_count())).submit(fn, *args)


def map_in_order(fn: Callable[[T], R], items: Iterable[T], *, workers: int | None = None) -> Iterator[R]:
    """``map(fn, items)`` on ``workers`` threads, results yielded in order; work not yet started is
    cancelled when the consumer stops (an error, a cancelled progress callback)."""
    workers = worker_count() if workers is None else workers
    if workers <= 1:
        yield from map(fn, items)
        return
    pool = _pool(workers)
    pending: deque[Future[R]] = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        for future in pending:  # let running blocks finish before the caller closes files under them
            if not future.cancelled():
                try:
                    future.result()
                except BaseException:  # the first error already propagates to the caller
                    pass


def tensor_progress(
    progress: ProgressCallback | None, cancel: CancelToken | None, phase: str
) -> Callable[[str, int, int], None] | None:
    """The row-block loops' ``(tensor, bytes done, bytes total)`` callback as :class:`ProgressEvent` values.

    It is also where a long check or repack stops when cancelled: it runs on the caller's thread between
    two blocks, inside the action's own clean-up (a cancelled repack leaves nothing behind).
    """
    if progress is None and cancel is None:
        return None

    def on_block(tensor: str, done: int, total: int) -> None:
        report(progress, ProgressEvent(phase, f"{phase} {tensor}", done, total))
        check(cancel)

    return on_block
