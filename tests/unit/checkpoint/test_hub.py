from __future__ import annotations

from pathlib import Path

import pytest

from gemmaserve.checkpoint import (
    grid_check,
    inspect_checkpoint,
    repack_checkpoint,
    validate_checkpoint,
)
from gemmaserve.checkpoint.gridcheck import GridScope
from gemmaserve.errors import CheckpointNotFound
from tests.support.checkpoint.builders import PREFIX
from tests.support.checkpoint.fixtures import FakeHub


@pytest.fixture
def hub_repos(fake_hub: FakeHub, unquantized_dir: Path, tmp_path: Path) -> FakeHub:
    repack_checkpoint(unquantized_dir, tmp_path / "ct")
    fake_hub.repos["google/tiny-qat-w4a16-ct"] = tmp_path / "ct"
    fake_hub.repos["google/tiny-qat-q4_0-unquantized"] = unquantized_dir
    return fake_hub


def test_inspect_reads_headers_only_through_range_requests(hub_repos: FakeHub, tmp_path: Path) -> None:
    report = inspect_checkpoint("google/tiny-qat-w4a16-ct", hub_api=hub_repos.api())
    local = inspect_checkpoint(str(tmp_path / "ct"))
    assert report.parts == local.parts and report.quantization == local.quantization
    shards = [n for n in hub_repos.bytes_sent if n.endswith(".safetensors")]
    assert len(shards) == 3
    for shard in shards:
        # huggingface_hub asks for the first 100 kB of each shard: kilobytes, never the weights.
        size = (tmp_path / "ct" / shard.rsplit("/", 1)[1]).stat().st_size
        assert hub_repos.bytes_sent[shard] == min(size, 100_001)
    assert sum(hub_repos.bytes_sent[s] for s in shards) < 200_000


def test_grid_check_over_the_hub_fetches_only_the_tensor_asked_for(hub_repos: FakeHub) -> None:
    module = f"{PREFIX}.layers.1.mlp.down_proj"
    report = grid_check(
        "google/tiny-qat-w4a16-ct",
        "google/tiny-qat-q4_0-unquantized",
        GridScope(tensor=module),
        hub_api=hub_repos.api(),
    )
    assert report.verdict == "bit-identical" and report.values == 64 * 128
    tensor_bytes = 64 * 128 * 2
    for shard in ("model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"):
        # Shards without the tensor: their header prefetch only.
        assert hub_repos.bytes_sent[f"google/tiny-qat-q4_0-unquantized/{shard}"] <= 100_001
    body = hub_repos.bytes_sent["google/tiny-qat-q4_0-unquantized/model-00001-of-00003.safetensors"]
    assert (
        body
        == min(
            (hub_repos.repos["google/tiny-qat-q4_0-unquantized"] / "model-00001-of-00003.safetensors").stat().st_size,
            100_001,
        )
        + 8
        + tensor_bytes
    )


def test_validate_and_missing_repos_over_the_hub(hub_repos: FakeHub) -> None:
    assert validate_checkpoint("google/tiny-qat-w4a16-ct", hub_api=hub_repos.api()).ok
    with pytest.raises(CheckpointNotFound):
        inspect_checkpoint("google/no-such-repo", hub_api=hub_repos.api())
