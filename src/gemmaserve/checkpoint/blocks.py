"""Row blocks of a tensor processed on worker threads, results handed back in order.

The grid kernels (numba) and numpy's large operations release the GIL, and reads
(``os.preadv``, HTTP range requests) wait outside it, so a few threads keep both the
disk or network and every core busy. At most ``workers + 1`` blocks are in flight,
which bounds memory by the block size, not by the tensor or the checkpoint.
Progress callbacks and errors reach the caller in block order, on the caller's thread.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

THREADS_ENV = "GEMMASERVE_CHECKPOINT_THREADS"


def worker_count() -> int:
    """Threads for block work: GEMMASERVE_CHECKPOINT_THREADS, else the CPUs this process may run on."""
    value = os.environ.get(THREADS_ENV, "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def row_blocks(rows: int, rows_per_block: int) -> list[tuple[int, int]]:
    step = max(1, rows_per_block)
    return [(r0, min(rows, r0 + step)) for r0 in range(0, rows, step)]


def map_in_order(fn: Callable[[T], R], items: Iterable[T], *, workers: int | None = None) -> Iterator[R]:
    """``map(fn, items)`` on ``workers`` threads, results yielded in order; pending work is cancelled
    when the consumer stops (an error, a cancelled progress callback)."""
    workers = worker_count() if workers is None else workers
    if workers <= 1:
        yield from map(fn, items)
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gemmaserve-block")
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
        pool.shutdown(wait=True, cancel_futures=True)
