"""Free disk for each path a vLLM install and start-up writes to, and per filesystem.

Three paths fill up separately: the target interpreter's install prefix (torch
and vLLM wheels, ~10 GiB), the temp dir pip unpacks wheels into (``TMPDIR``),
and the Hugging Face cache that receives the weights. Each is resolved through
symlinks; a path that does not exist yet is measured at its nearest existing
parent, which is where it will be created. Paths on one filesystem share its space.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gemmaserve.host.probed import describe_exception

GIB = 1024**3


class DiskRole(StrEnum):
    INSTALL = "install"
    TEMP = "temp"
    HF_CACHE = "hf_cache"


class PathSpace(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: DiskRole
    path: str
    resolved_path: str | None = None
    measured_path: str | None = None  # the nearest existing directory at or above resolved_path
    device: int | None = None
    free_bytes: int | None = None
    total_bytes: int | None = None
    error: str | None = None


class FilesystemSpace(BaseModel):
    model_config = ConfigDict(frozen=True)

    device: int
    measured_path: str
    free_bytes: int
    total_bytes: int
    roles: list[DiskRole]


class DiskFacts(BaseModel):
    model_config = ConfigDict(frozen=True)

    paths: list[PathSpace]
    filesystems: list[FilesystemSpace]


def hf_cache_path(env: Mapping[str, str], home: Path) -> Path:
    """Where huggingface_hub puts downloaded weights, following its own precedence."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HUGGINGFACE_HUB_CACHE"):
        return Path(env["HUGGINGFACE_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    cache_home = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
    return cache_home / "huggingface" / "hub"


def checkpoint_cached(cache: Path, repo_id: str) -> bool:
    """Whether a snapshot of ``repo_id`` with safetensors files sits in the HF cache at ``cache``."""
    snapshots = cache / ("models--" + repo_id.replace("/", "--")) / "snapshots"
    try:
        return any(next(snapshot.glob("*.safetensors"), None) is not None for snapshot in snapshots.iterdir())
    except OSError:
        return False


def temp_path(env: Mapping[str, str]) -> Path:
    """pip unpacks into ``tempfile.gettempdir()``, which honours TMPDIR, TEMP, TMP."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        if env.get(name):
            return Path(env[name])
    return Path(tempfile.gettempdir())


def default_disk_paths(install_prefix: str, env: Mapping[str, str], home: Path) -> dict[DiskRole, Path]:
    return {
        DiskRole.INSTALL: Path(install_prefix),
        DiskRole.TEMP: temp_path(env),
        DiskRole.HF_CACHE: hf_cache_path(env, home),
    }


def _nearest_existing(path: Path) -> Path:
    current = path
    while not current.exists():
        if current.parent == current:
            break
        current = current.parent
    return current


def measure_path(
    role: DiskRole,
    path: Path,
    *,
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs,
    stat: Callable[[str], os.stat_result] = os.stat,
) -> PathSpace:
    try:
        resolved = Path(os.path.realpath(path))
        measured = _nearest_existing(resolved)
        vfs = statvfs(str(measured))
        return PathSpace(
            role=role,
            path=str(path),
            resolved_path=str(resolved),
            measured_path=str(measured),
            device=stat(str(measured)).st_dev,
            # f_bavail: blocks free to unprivileged users (f_bfree includes root's reserve).
            free_bytes=vfs.f_bavail * vfs.f_frsize,
            total_bytes=vfs.f_blocks * vfs.f_frsize,
        )
    except Exception as exc:  # one unreadable path must not hide the others
        return PathSpace(role=role, path=str(path), error=describe_exception(exc))


def probe_disk(
    paths: Mapping[DiskRole, Path],
    *,
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs,
    stat: Callable[[str], os.stat_result] = os.stat,
) -> DiskFacts:
    measured = [measure_path(role, path, statvfs=statvfs, stat=stat) for role, path in paths.items()]
    by_device: dict[int, FilesystemSpace] = {}
    for space in measured:
        if space.device is None or space.free_bytes is None or space.total_bytes is None:
            continue
        known = by_device.get(space.device)
        if known is None:
            by_device[space.device] = FilesystemSpace(
                device=space.device,
                measured_path=space.measured_path or space.path,
                free_bytes=space.free_bytes,
                total_bytes=space.total_bytes,
                roles=[space.role],
            )
        else:
            by_device[space.device] = known.model_copy(update={"roles": [*known.roles, space.role]})
    return DiskFacts(paths=measured, filesystems=list(by_device.values()))
