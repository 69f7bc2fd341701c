"""The GPUs this host's driver sees, from ``nvidia-smi --query-gpu`` (CSV).

No nvidia-smi, a driver that cannot talk to the card, or no device: each is an
error with the tool's own words, never an empty "no GPU" that looks fine.
Drivers older than 510 do not know ``compute_cap``; then it is left unknown.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from gemmaserve.host.probed import Probed, describe_exception
from gemmaserve.host.runner import CommandRunner, run_command

QUERY_FIELDS = "name,compute_cap,memory.total,driver_version"
QUERY_FIELDS_OLD_DRIVER = "name,memory.total,driver_version"
NVIDIA_SMI_TIMEOUT_S = 20.0


class GpuInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int
    name: str
    compute_capability: str | None  # "7.5"
    memory_total_mib: int | None
    driver_version: str | None

    @property
    def sm(self) -> int | None:
        """75 for a compute capability of 7.5."""
        if not self.compute_capability:
            return None
        major, _, minor = self.compute_capability.partition(".")
        return int(major) * 10 + int(minor or 0)


def _mib(text: str) -> int | None:
    cleaned = text.replace("MiB", "").strip()
    return int(cleaned) if cleaned.isdigit() else None


def _value(text: str) -> str | None:
    cleaned = text.strip()
    return None if cleaned in {"", "[N/A]", "N/A", "[Not Supported]"} else cleaned


def parse_gpu_csv(text: str, *, has_compute_cap: bool = True) -> list[GpuInfo]:
    """Parse ``nvidia-smi --query-gpu=… --format=csv,noheader`` output (units optional)."""
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        expected = 4 if has_compute_cap else 3
        if len(cells) != expected:
            raise ValueError(f"unexpected nvidia-smi line (want {expected} fields): {line!r}")
        if has_compute_cap:
            name, cap, memory, driver = cells
        else:
            name, memory, driver = cells
            cap = ""
        gpus.append(
            GpuInfo(
                index=len(gpus),
                name=name,
                compute_capability=_value(cap),
                memory_total_mib=_mib(memory),
                driver_version=_value(driver),
            )
        )
    return gpus


def _query(runner: CommandRunner, binary: str, fields: str) -> tuple[int, str]:
    result = runner([binary, f"--query-gpu={fields}", "--format=csv,noheader"], NVIDIA_SMI_TIMEOUT_S)
    message = (result.stdout + "\n" + result.stderr).strip()
    return result.returncode, message if result.returncode else result.stdout


def probe_gpus(
    runner: CommandRunner = run_command,
    which: Callable[[str], str | None] | None = None,
) -> Probed[list[GpuInfo]]:
    """The GPUs nvidia-smi lists; ``error`` says why there are none."""
    import shutil

    locate = which or shutil.which
    binary = locate("nvidia-smi")
    if binary is None:
        return Probed[list[GpuInfo]](
            error="nvidia-smi not found on PATH: no NVIDIA driver is installed, or it is not on PATH"
        )
    try:
        code, text = _query(runner, binary, QUERY_FIELDS)
        has_cap = True
        if code and "compute_cap" in text and "not a valid field" in text:
            code, text = _query(runner, binary, QUERY_FIELDS_OLD_DRIVER)
            has_cap = False
        if code:
            return Probed[list[GpuInfo]](error=f"nvidia-smi exited {code}: {text}")
        gpus = parse_gpu_csv(text, has_compute_cap=has_cap)
    except Exception as exc:  # timeouts, unreadable output: recorded, not raised
        return Probed[list[GpuInfo]](error=describe_exception(exc))
    if not gpus:
        return Probed[list[GpuInfo]](error="nvidia-smi listed no GPUs")
    return Probed[list[GpuInfo]](value=gpus)
