"""Fill the tests' cache of real vLLM sources from the package index: the one step that needs the network.

For each vLLM release the Turing clamp is tested on, reads only the needed bytes of the published
wheel (HTTP range requests on the zip's central directory and two members), checks each member
against the wheel's own RECORD hash, and keeps it in a cache outside the repository
(`~/.cache/gemmaserve-tests/vllm/<version>/`, or under `$GEMMASERVE_TEST_CACHE`); it also keeps the
index's list of releases (`released.json`). The test run reads this cache only and skips, naming
this command, what it does not find. Needs only the standard library and this checkout:

    python tools/fetch_vllm_sources.py            # the tested releases and the list of releases
    python tools/fetch_vllm_sources.py 0.35.0     # one more release, to study it
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import urllib.request
import zipfile
from pathlib import Path

FILL_COMMAND = "python tools/fetch_vllm_sources.py"
KERNEL_MEMBER = "vllm/v1/attention/ops/triton_unified_attention.py"
HELPERS_MEMBER = "vllm/v1/attention/ops/triton_attention_helpers.py"
SIMPLE_INDEX_URL = "https://pypi.org/simple/vllm/"
FIRST_VERSION = (0, 26, 0)
RELEASES_FILE = "released.json"


def cache_root() -> Path:
    override = os.environ.get("GEMMASERVE_TEST_CACHE")
    base = Path(override) if override else Path.home() / ".cache" / "gemmaserve-tests"
    return base / "vllm"


def cached_kernel_file(version: str) -> Path | None:
    """The cached kernel file of ``version`` when the fill completed for it (its helpers module beside it)."""
    folder = cache_root() / version
    target = folder / "triton_unified_attention.py"
    return target if target.is_file() and (folder / "triton_attention_helpers.py").is_file() else None


def cached_released_versions() -> list[str] | None:
    """The index's releases as the last fill listed them; None before any fill."""
    listing = cache_root() / RELEASES_FILE
    if not listing.is_file():
        return None
    versions: list[str] = json.loads(listing.read_text())["versions"]
    return versions


class _HttpRangeFile:
    """A read-only, seekable file over HTTP range requests (enough for `zipfile`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=60) as response:
            self.size = int(response.headers["Content-Length"])
        self.position = 0

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.position, 2: self.size}[whence]
        self.position = base + offset
        return self.position

    def read(self, count: int = -1) -> bytes:
        if count < 0:
            count = self.size - self.position
        if count == 0 or self.position >= self.size:
            return b""
        end = min(self.size, self.position + count) - 1
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.position}-{end}"})
        with urllib.request.urlopen(request, timeout=120) as response:
            data: bytes = response.read()
        self.position += len(data)
        return data


def _index_files() -> list[dict[str, object]]:
    """The simple index's file list for vLLM (PEP 691 JSON)."""
    request = urllib.request.Request(SIMPLE_INDEX_URL, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files: list[dict[str, object]] = json.load(response)["files"]
    return files


def _version_of(filename: str) -> str:
    return filename.split("-")[1] if filename.endswith(".whl") else ""


def released_versions() -> list[str]:
    """Every final vLLM release from 0.26.0 on that has an x86_64 wheel on the index."""
    versions = set()
    for entry in _index_files():
        name = str(entry["filename"])
        version = _version_of(name)
        parts = version.split(".")
        if "x86_64" in name and all(p.isdigit() for p in parts) and tuple(map(int, parts)) >= FIRST_VERSION:
            versions.add(version)
    return sorted(versions, key=lambda v: tuple(int(p) for p in v.split(".")))


def _wheel_url(version: str) -> str:
    for entry in _index_files():
        name = str(entry["filename"])
        if _version_of(name) == version and name.endswith("x86_64.whl"):
            return str(entry["url"])
    raise RuntimeError(f"vLLM {version}: no x86_64 wheel on the index")


def _record_hash(record: str, member: str) -> str:
    return next(line.split(",")[1] for line in record.splitlines() if line.startswith(member + ","))


def _sha256_record_form(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def fetch_kernel_file(version: str) -> Path:
    """The cached kernel file of `version` (its helpers module beside it), fetched and hash-checked once."""
    cached = cached_kernel_file(version)
    if cached is not None:
        return cached
    folder = cache_root() / version
    target = folder / "triton_unified_attention.py"
    url = _wheel_url(version)
    with zipfile.ZipFile(_HttpRangeFile(url)) as wheel:  # type: ignore[arg-type]
        record_name = next(n for n in wheel.namelist() if n.endswith(".dist-info/RECORD"))
        record = wheel.read(record_name).decode()
        members = {member: wheel.read(member) for member in (HELPERS_MEMBER, KERNEL_MEMBER)}
    folder.mkdir(parents=True, exist_ok=True)
    for member, data in members.items():
        if _sha256_record_form(data) != _record_hash(record, member):
            raise RuntimeError(f"vLLM {version}: {member} does not match the wheel's RECORD")
        partial = folder / (Path(member).name + ".partial")
        partial.write_bytes(data)
        partial.replace(folder / Path(member).name)  # the kernel file last: its presence marks completeness
    (folder / "source.json").write_text(json.dumps({"wheel_url": url, "record": record_name}))
    return target


def store_released_versions() -> list[str]:
    versions = released_versions()
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    partial = root / (RELEASES_FILE + ".partial")
    partial.write_text(json.dumps({"index": SIMPLE_INDEX_URL, "versions": versions}))
    partial.replace(root / RELEASES_FILE)
    return versions


def tested_versions() -> tuple[str, ...]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout, installed or not
    from gemmaserve.turing.versions import TESTED_VLLM_VERSIONS

    return TESTED_VLLM_VERSIONS


def main() -> int:
    versions = sys.argv[1:] or tested_versions()
    for version in versions:
        print(version, fetch_kernel_file(version), flush=True)
    print("releases on the index:", *store_released_versions(), flush=True)
    print(f"cache: {cache_root()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
