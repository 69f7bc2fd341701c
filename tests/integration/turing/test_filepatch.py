"""apply / verify / revert on the real file of every tested vLLM release, and every refusal."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from gemmaserve.cli.turing import cli
from gemmaserve.errors import (
    FileNotWritable,
    PatchConflict,
    UnrecognisedSource,
    UnsupportedVllmVersion,
)
from gemmaserve.turing import block, filepatch
from gemmaserve.turing.filepatch import PatchTarget, PatchVerdict
from gemmaserve.turing.versions import TESTED_VLLM_VERSIONS, is_supported, parse_version
from tests.support.turing.fakes import fake_interpreter, launch_unified_attention


def _target(path: Path) -> PatchTarget:
    return PatchTarget(path=str(path))


def test_every_tested_release_is_on_the_index_and_new_ones_are_reported(
    released_vllm_versions: list[str], untested_vllm_releases: list[str]
) -> None:
    # A release newer than the tested ones is reported in the session summary (conftest), never a
    # failure here: the clamp refuses it at run time until its source is studied and versions.py extended.
    assert released_vllm_versions, "the index listed no release"
    assert set(TESTED_VLLM_VERSIONS) <= set(released_vllm_versions)
    assert all(is_supported(v) for v in TESTED_VLLM_VERSIONS)
    untested_vllm_releases.extend(
        sorted(set(released_vllm_versions) - set(TESTED_VLLM_VERSIONS), key=lambda v: parse_version(v) or (0, 0, 0))
    )
    for version in untested_vllm_releases:
        assert parse_version(version) is not None
        if not is_supported(version):
            assert (parse_version(version) or (0, 0, 0)) >= (0, 35, 0)


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        ("0.25.9", False),
        ("0.26.0", True),
        ("0.28.9", True),
        ("0.29.0", True),
        ("0.34.7+cu130", True),
        ("0.32.0+cpu", True),
        ("0.35.0", False),
        ("1.0.0", False),
        ("nonsense", False),
    ],
)
def test_version_range(version: str, supported: bool) -> None:
    assert is_supported(version) is supported
    assert (parse_version(version) is None) is (version == "nonsense")


def test_apply_verify_reapply_revert_round_trip(kernel_copy: Path) -> None:
    original = kernel_copy.read_bytes()
    assert filepatch.verify(_target(kernel_copy)).verdict is PatchVerdict.ABSENT
    applied = filepatch.apply(_target(kernel_copy))
    assert applied.changed and applied.action == "applied"
    patched = kernel_copy.read_bytes()
    compile(patched, str(kernel_copy), "exec")
    assert Path(str(applied.backup)).read_bytes() == original
    result = filepatch.verify(_target(kernel_copy))
    assert result.verdict is PatchVerdict.PRESENT and result.ok
    again = filepatch.apply(_target(kernel_copy))
    assert again.action == "already-applied" and not again.changed
    assert kernel_copy.read_bytes() == patched
    assert patched.count(block.BEGIN_PREFIX.encode()) == 1
    filepatch.revert(_target(kernel_copy))
    assert kernel_copy.read_bytes() == original
    assert not Path(str(applied.backup)).exists()


def test_dry_run_writes_nothing_and_shows_the_block(kernel_copy: Path) -> None:
    original = kernel_copy.read_bytes()
    result = filepatch.apply(_target(kernel_copy), dry_run=True)
    assert result.action == "would-apply" and block.BEGIN_PREFIX in result.diff
    assert kernel_copy.read_bytes() == original


def _tile_function(source: str, capability_major: int, smem_limit_bytes: int) -> types.FunctionType:
    """The module's `_get_tile_size` executed in isolation (importing the module needs vLLM)."""
    import ast

    tree = ast.parse(source)
    wanted = [
        node
        for node in tree.body
        if (
            isinstance(node, ast.FunctionDef)
            and (node.name.startswith("_gemmaserve") or node.name in ("_get_tile_size", "_is_gemma3_attention"))
        )
        or (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id.startswith("_gemmaserve") for t in node.targets)
        )
    ]
    namespace: dict[str, object] = {}
    # The functions under test are vLLM's and ours from a real file; running them is the point.
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "<tile>", "exec"), namespace)
    namespace["_gemmaserve_device"] = lambda: (capability_major, smem_limit_bytes)
    return namespace["_get_tile_size"]  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("major", "limit", "head", "prefill_tile"),
    [
        (7, 65_536, 512, 16),
        (7, 65_536, 256, 32),
        (7, 49_152, 512, 16),
        (8, 101_376, 512, 32),
        (8, 1, 512, 32),
        (9, 232_448, 512, 32),
    ],
)
def test_patched_tile_function_clamps_only_before_ampere(
    kernel_copy: Path, major: int, limit: int, head: int, prefill_tile: int
) -> None:
    stock = _tile_function(kernel_copy.read_text(), major, limit)
    filepatch.apply(_target(kernel_copy))
    patched = _tile_function(kernel_copy.read_text(), major, limit)
    for window in (0, 512, 1024):
        for prefill in (True, False):
            got, want = patched(head, window, 2, prefill), stock(head, window, 2, prefill)
            if major >= 8:
                assert got == want
            else:
                assert got <= want
                assert 4 * head * (got + 16) <= limit or got == 16
    assert patched(head, 0, 2, True) == prefill_tile


class _Recorder:
    """Stands in for the jitted kernel: ``[grid](**kwargs)`` records the keyword arguments."""

    def __init__(self) -> None:
        self.launches: list[dict[str, object]] = []

    def __getitem__(self, grid: object) -> object:
        return lambda **kwargs: self.launches.append(kwargs)


def _patched_launch(source: str, capability_major: int, smem_limit_bytes: int) -> tuple[object, _Recorder]:
    """The patched file's ``kernel_unified_attention`` run in isolation, wrapping a recorder."""
    import ast

    recorder = _Recorder()
    tree = ast.parse(source)
    first = next(i for i, node in enumerate(tree.body) if getattr(node, "name", "") == "_get_tile_size")
    end = next(
        i
        for i, node in enumerate(tree.body)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "kernel_unified_attention" for t in node.targets)
    )
    helpers = [node for node in tree.body[:first] if getattr(node, "name", "") == "_is_gemma3_attention"]
    namespace: dict[str, object] = {"kernel_unified_attention": recorder}
    # The functions under test are vLLM's and ours from a real file; running them is the point.
    exec(compile(ast.Module(body=helpers + tree.body[first : end + 1], type_ignores=[]), "<block>", "exec"), namespace)
    namespace["_gemmaserve_device"] = lambda: (capability_major, smem_limit_bytes)
    return namespace["kernel_unified_attention"], recorder


@pytest.mark.parametrize(("major", "limit"), [(7, 65_536), (7, 98_304), (6, 49_152), (8, 101_376), (9, 232_448)])
def test_patched_launch_changes_warps_only_where_vllms_own_tile_overflows(
    kernel_copy: Path, major: int, limit: int
) -> None:
    filepatch.apply(_target(kernel_copy))
    kernel, recorder = _patched_launch(kernel_copy.read_text(), major, limit)
    launches = [  # (head, tile launched, 3D, window, query heads per KV head, element size)
        (512, 16, False, 0, 8, 2),
        (512, 16, False, 0, 16, 2),
        (512, 16, True, 0, 8, 2),
        (256, 32, False, 512, 8, 2),
        (256, 32, False, 1024, 2, 2),
        (256, 32, True, 1024, 2, 2),
        (512, 16, False, 0, 8, 4),
    ]
    for head, tile, is_3d, window, per_kv, element_size in launches:
        launch_unified_attention(kernel, head, tile, is_3d, window=window, per_kv=per_kv, element_size=element_size)
    warps = [launch.get("num_warps") for launch in recorder.launches]
    # Only the 16-bit head-512 2D launch overflows (vLLM's prefill tile 32 needs 98,304 B), and only on sm_75.
    expected_overflow = 8 if (major, limit) == (7, 65_536) else None
    assert warps == [expected_overflow, expected_overflow, None, None, None, None, None]


def test_hand_edit_after_patch_is_stale_and_refused(kernel_copy: Path) -> None:
    filepatch.apply(_target(kernel_copy))
    kernel_copy.write_text(kernel_copy.read_text() + "# local tweak\n")
    edited = kernel_copy.read_bytes()
    assert filepatch.verify(_target(kernel_copy)).verdict is PatchVerdict.STALE
    with pytest.raises(PatchConflict):
        filepatch.revert(_target(kernel_copy))
    with pytest.raises(PatchConflict):
        filepatch.apply(_target(kernel_copy))
    assert kernel_copy.read_bytes() == edited


def test_a_block_another_gemmaserve_wrote_is_outdated_replaced_by_apply_and_reverted(kernel_copy: Path) -> None:
    """After `pip install -U gemmaserve` the block in a patched file is not what this version writes. The file
    around it still hashes to the original the marker records, so both ways out are safe and must work."""
    original = kernel_copy.read_bytes()
    filepatch.apply(_target(kernel_copy))
    current = kernel_copy.read_text()
    older = current.replace("margin_bytes=0)", "margin_bytes=1)")  # the same block as another version wrote it
    assert older != current
    kernel_copy.write_text(older)
    verdict = filepatch.verify(_target(kernel_copy))
    assert verdict.verdict is PatchVerdict.OUTDATED and not verdict.ok
    assert "another gemmaserve version" in verdict.detail
    updated = filepatch.apply(_target(kernel_copy))
    assert (updated.action, updated.changed) == ("updated", True)
    assert kernel_copy.read_text() == current
    assert filepatch.verify(_target(kernel_copy)).verdict is PatchVerdict.PRESENT
    kernel_copy.write_text(older)
    reverted = filepatch.revert(_target(kernel_copy))
    assert reverted.action == "reverted" and kernel_copy.read_bytes() == original


def test_an_outdated_block_over_an_edited_file_is_still_stale(kernel_copy: Path) -> None:
    filepatch.apply(_target(kernel_copy))
    edited = kernel_copy.read_text().replace("margin_bytes=0)", "margin_bytes=1)") + "# local tweak\n"
    kernel_copy.write_text(edited)
    assert filepatch.verify(_target(kernel_copy)).verdict is PatchVerdict.STALE
    for act in (filepatch.apply, filepatch.revert):
        with pytest.raises(PatchConflict):
            act(_target(kernel_copy))
    assert kernel_copy.read_text() == edited


def test_two_blocks_are_patched_twice(kernel_copy: Path) -> None:
    filepatch.apply(_target(kernel_copy))
    text = kernel_copy.read_text()
    start, end, _ = block.find_blocks(text)[0]
    kernel_copy.write_text(text + text[start:end])
    result = filepatch.verify(_target(kernel_copy))
    assert result.verdict is PatchVerdict.PATCHED_TWICE and not result.ok
    with pytest.raises(PatchConflict):
        filepatch.apply(_target(kernel_copy))


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "bin.py"
    path.write_bytes(b"\xff\xfe\x00")
    assert filepatch.verify(_target(path)).verdict is PatchVerdict.UNREADABLE
    assert filepatch.verify(_target(tmp_path / "missing.py")).verdict is PatchVerdict.UNREADABLE


@pytest.mark.parametrize(
    "mutation",
    [
        ("def _get_tile_size(", "def _pick_tile_size("),
        ("    is_prefill: bool,\n) -> int:", "    is_prefill: bool,\n    block_m: int = 16,\n) -> int:"),
        ("TILE_SIZE_DECODE = _get_tile_size(", "TILE_SIZE_DECODE = _tiles.get("),
    ],
)
def test_unknown_shapes_are_refused_unchanged(kernel_copy: Path, mutation: tuple[str, str]) -> None:
    text = kernel_copy.read_text()
    assert mutation[0] in text
    kernel_copy.write_text(text.replace(mutation[0], mutation[1]))
    before = kernel_copy.read_bytes()
    with pytest.raises(UnrecognisedSource) as caught:
        filepatch.apply(_target(kernel_copy))
    assert caught.value.exit_code == 2 and "def _get_tile_size(" in str(caught.value)
    assert kernel_copy.read_bytes() == before


def test_read_only_target_is_refused(kernel_copy: Path) -> None:
    before = kernel_copy.read_bytes()
    with pytest.raises(FileNotWritable):
        filepatch.apply(_target(kernel_copy), is_writable=lambda _path: False)
    assert kernel_copy.read_bytes() == before


def test_concurrent_apply_is_refused_by_the_lock(kernel_copy: Path) -> None:
    lock = filepatch.lock_path_for(kernel_copy)
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
                "print('held', flush=True); time.sleep(30)"
            ),
            str(lock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = kernel_copy.read_bytes()
        with pytest.raises(PatchConflict, match="lock"):
            filepatch.apply(_target(kernel_copy))
        assert kernel_copy.read_bytes() == before
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    with open(lock, "a") as handle:  # released: an apply may take it again
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_locate_through_the_target_interpreter(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.34.0")
    target = filepatch.locate_kernel_file(str(python))
    assert target.vllm_version == "0.34.0" and Path(target.path).read_bytes() == kernel_copy.read_bytes()
    assert filepatch.apply(target).changed


def test_unknown_newer_version_is_refused(tmp_path: Path, kernel_copy: Path) -> None:
    python = fake_interpreter(tmp_path, kernel_copy, "0.35.0")
    target = filepatch.locate_kernel_file(str(python))
    before = Path(target.path).read_bytes()
    with pytest.raises(UnsupportedVllmVersion):
        filepatch.apply(target)
    assert Path(target.path).read_bytes() == before
    assert not filepatch.verify(target).ok


@pytest.mark.parametrize("as_json", [True, False])
def test_cli_round_trip(kernel_copy: Path, as_json: bool) -> None:
    runner = CliRunner()
    flags = ["--json"] if as_json else []
    original = kernel_copy.read_bytes()
    absent = runner.invoke(cli, ["verify", "--file", str(kernel_copy), *flags])
    assert absent.exit_code == 1
    if as_json:
        assert json.loads(absent.stdout)["ok"] is False
    assert runner.invoke(cli, ["apply", "--file", str(kernel_copy), "--yes", *flags]).exit_code == 0
    present = runner.invoke(cli, ["verify", "--file", str(kernel_copy), *flags])
    assert present.exit_code == 0
    if as_json:
        assert json.loads(present.stdout)["verdict"] == "present" and json.loads(present.stdout)["ok"] is True
    assert runner.invoke(cli, ["revert", "--file", str(kernel_copy), "--yes", *flags]).exit_code == 0
    assert kernel_copy.read_bytes() == original


def test_cli_refuses_unknown_file_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text("x = 1\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gemmaserve",
            "turing",
            "apply",
            "--file",
            str(path),
            "--vllm-version",
            "0.26.0",
            "--yes",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "def _get_tile_size(" in done.stderr and "Traceback" not in done.stderr and done.stdout == ""
    assert path.read_text() == "x = 1\n"


def test_a_bare_file_needs_its_version_and_one_outside_the_range_is_refused(
    vllm_kernel_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No version is known from a bare file: read beside it, or given; 0.25.1 is refused either way."""
    from gemmaserve.cli import app
    from gemmaserve.cli.errors import run_with_error_mapping
    from tests.support.turing.fixtures import installed_copy

    def apply(path: Path, *extra: str) -> tuple[int, str]:
        code = run_with_error_mapping(app, ["turing", "apply", "--file", str(path), *extra, "--yes"], debug=False)
        return code, capsys.readouterr().err

    newest = max(vllm_kernel_files, key=lambda version: tuple(int(p) for p in version.split(".")[:3]))
    stock = vllm_kernel_files[newest].read_bytes()
    bare = tmp_path / "triton_unified_attention.py"
    bare.write_bytes(stock)
    code, err = apply(bare)
    assert code == 2 and "--vllm-version" in err and bare.read_bytes() == stock
    old = installed_copy(vllm_kernel_files[newest], "0.25.1", tmp_path / "old-site")
    code, err = apply(old)
    assert code != 0 and "0.25.1" in err and old.read_bytes() == stock
    code, err = apply(bare, "--vllm-version", "0.25.1")
    assert code != 0 and "0.25.1" in err and bare.read_bytes() == stock
    code, err = apply(bare, "--vllm-version", newest)
    assert code == 0, err
