"""Host memory from ``/proc/meminfo``: what is available to a new process, and swap.

``MemAvailable`` is the kernel's estimate of what can be allocated without
swapping (page cache counts as reclaimable); ``MemFree`` is not, and is never used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gemmaserve.host.probed import Probed, probe_step

MEMINFO_PATH = Path("/proc/meminfo")
GIB = 1024**3


class MemoryFacts(BaseModel):
    model_config = ConfigDict(frozen=True)

    mem_total_bytes: int
    mem_available_bytes: int
    swap_total_bytes: int
    swap_free_bytes: int

    @property
    def mem_available_gib(self) -> float:
        return self.mem_available_bytes / GIB

    @property
    def swap_free_gib(self) -> float:
        return self.swap_free_bytes / GIB

    @property
    def stageable_gib(self) -> float:
        """RAM plus free swap a loading process could use: the figure a checkpoint load must fit in."""
        return (self.mem_available_bytes + self.swap_free_bytes) / GIB


_REQUIRED = ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree")


def parse_meminfo(text: str) -> MemoryFacts:
    """Parse ``/proc/meminfo`` text. Raises ValueError when a needed field is missing.

    Kernels before 3.14 have no ``MemAvailable``; rather than guess from MemFree,
    that is an error (doctor reports it as unknown).
    """
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if not parts:
            continue
        try:
            number = int(parts[0])
        except ValueError:
            continue
        unit = parts[1].lower() if len(parts) > 1 else ""
        fields[name.strip()] = number * 1024 if unit == "kb" else number
    missing = [name for name in _REQUIRED if name not in fields]
    if missing:
        raise ValueError(f"/proc/meminfo has no {', '.join(missing)}")
    return MemoryFacts(
        mem_total_bytes=fields["MemTotal"],
        mem_available_bytes=fields["MemAvailable"],
        swap_total_bytes=fields["SwapTotal"],
        swap_free_bytes=fields["SwapFree"],
    )


def probe_memory(
    read_text: Callable[[], str] = MEMINFO_PATH.read_text,
) -> Probed[MemoryFacts]:
    return probe_step(lambda: parse_meminfo(read_text()))
