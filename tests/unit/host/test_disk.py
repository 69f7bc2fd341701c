from __future__ import annotations

import os
from pathlib import Path

from gemmaserve.host.disk import (
    DiskRole,
    default_disk_paths,
    hf_cache_path,
    probe_disk,
    temp_path,
)


def test_hf_cache_precedence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert hf_cache_path({}, home) == home / ".cache/huggingface/hub"
    assert hf_cache_path({"XDG_CACHE_HOME": "/x"}, home) == Path("/x/huggingface/hub")
    assert hf_cache_path({"HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}, home) == Path("/h/hub")
    assert hf_cache_path({"HF_HUB_CACHE": "/c", "HF_HOME": "/h"}, home) == Path("/c")


def test_temp_follows_tmpdir() -> None:
    assert temp_path({"TMPDIR": "/big/tmp"}) == Path("/big/tmp")


def test_symlinked_cache_is_resolved_and_missing_dirs_are_measured_at_their_parent(
    tmp_path: Path,
) -> None:
    big = tmp_path / "big"
    (big / "hf").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "hf").symlink_to(big / "hf")
    paths = default_disk_paths(
        str(tmp_path / "prefix"),
        {"HF_HOME": str(tmp_path / "home" / "hf"), "TMPDIR": str(tmp_path)},
        tmp_path,
    )
    facts = probe_disk(paths)
    by_role = {space.role: space for space in facts.paths}
    cache = by_role[DiskRole.HF_CACHE]
    assert cache.resolved_path == str(big / "hf" / "hub")
    assert cache.measured_path == str(big / "hf")  # hub/ does not exist yet
    assert by_role[DiskRole.INSTALL].measured_path == str(tmp_path)
    # all three live on the filesystem of tmp_path: one filesystem, three roles
    assert len(facts.filesystems) == 1
    assert sorted(facts.filesystems[0].roles) == sorted(DiskRole)
    assert facts.filesystems[0].free_bytes == by_role[DiskRole.INSTALL].free_bytes  # first path measured there


def test_distinct_filesystems_are_reported_apart(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    real_stat = os.stat

    class FakeStat:
        def __init__(self, dev: int) -> None:
            self.st_dev = dev

    def stat(path: str) -> os.stat_result:
        return FakeStat(2 if path.startswith(str(b)) else real_stat(path).st_dev)  # type: ignore[return-value]

    facts = probe_disk({DiskRole.INSTALL: a, DiskRole.HF_CACHE: b}, stat=stat)
    assert len(facts.filesystems) == 2


def test_one_failing_path_does_not_hide_the_others(tmp_path: Path) -> None:
    def statvfs(path: str) -> os.statvfs_result:
        if "broken" in path:
            raise OSError(5, "Input/output error")
        return os.statvfs(path)

    broken = tmp_path / "broken"
    broken.mkdir()
    facts = probe_disk({DiskRole.INSTALL: tmp_path, DiskRole.TEMP: broken}, statvfs=statvfs)
    by_role = {space.role: space for space in facts.paths}
    assert by_role[DiskRole.TEMP].error == "OSError: [Errno 5] Input/output error"
    assert by_role[DiskRole.INSTALL].free_bytes is not None


def test_checkpoint_in_the_cache_is_recognised(tmp_path: Path) -> None:
    from gemmaserve.host.disk import checkpoint_cached

    repo = "google/gemma-4-E2B-it-qat-w4a16-ct"
    snapshot = tmp_path / "models--google--gemma-4-E2B-it-qat-w4a16-ct" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    assert not checkpoint_cached(tmp_path, repo)  # a snapshot dir without weights is an interrupted download
    (snapshot / "model.safetensors").write_bytes(b"\0" * 8)
    assert checkpoint_cached(tmp_path, repo)
    assert not checkpoint_cached(tmp_path, "google/gemma-4-E4B-it")
