"""The client measuring itself: CPU time per chunk and as a share of the measured wall time.

A benchmark client that saturates its core delays its own timestamps and inflates
TTFT/ITL; it must say so. On the 2-core development machine the client needs ~22 µs of
CPU per chunk (aiohttp's read path needed 30–46 µs); above ~25% of one core its p99 timing
error exceeds ~5 ms (docs/bench-client-performance.md).
Pure accounting; the engine supplies CPU and wall readings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gemmaserve.measurements.schema import ClientOverhead

WARN_SHARE = 0.25  # of one core, over a measured step
MIN_JUDGED_WALL_S = 0.2  # shorter steps are dominated by connection set-up: too noisy to judge


@dataclass
class OverheadMeter:
    cpu_s: float = 0.0
    wall_s: float = 0.0
    chunks: int = 0
    worst_share: float = 0.0
    worst_step: str | None = None
    steps: dict[str, float] = field(default_factory=dict)

    def add(self, step: str, *, cpu_s: float, wall_s: float, chunks: int, judged: bool = True) -> None:
        """Account one measured step (a batch); ``judged`` steps are timing-sensitive (decode, load)."""
        self.cpu_s += cpu_s
        self.wall_s += wall_s
        self.chunks += chunks
        if judged and wall_s >= MIN_JUDGED_WALL_S:
            share = cpu_s / wall_s
            self.steps[step] = max(share, self.steps.get(step, 0.0))
            if share > self.worst_share:
                self.worst_share, self.worst_step = share, step

    def warning(self, threshold: float = WARN_SHARE) -> str | None:
        if self.worst_share <= threshold or self.worst_step is None:
            return None
        per_chunk_us = 1e6 * self.cpu_s / self.chunks if self.chunks else float("nan")
        return (
            f"the client used {self.worst_share:.0%} of a CPU core during {self.worst_step} "
            f"({per_chunk_us:.0f} µs per chunk); above {threshold:.0%} its timestamps lag and TTFT/ITL "
            "read high: lower the concurrency or run the client on a larger machine"
        )

    def result(self) -> ClientOverhead:
        return ClientOverhead(
            cpu_s=self.cpu_s,
            chunks=self.chunks,
            cpu_s_per_chunk=self.cpu_s / self.chunks if self.chunks else None,
            share=self.cpu_s / self.wall_s if self.wall_s > 0 else None,
            warning=self.warning(),
        )
