"""Where a checkpoint's bytes come from: a local directory/file, or a hub repo read by range.

The only module that touches files or the hub. Local tensors are read in row
ranges with ``os.preadv`` into one preallocated buffer (safetensors' mmap grows
RSS to the file size). Hub headers come from huggingface_hub's
``parse_safetensors_file_metadata`` (HTTP range requests); tensor bytes from
range requests of just the rows asked for. huggingface_hub errors are
translated here and nowhere else.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from gemmaserve.checkpoint.header import (
    SafetensorsHeader,
    TensorEntry,
    header_length,
    read_local_header,
    validate_header_dict,
)
from gemmaserve.errors import CheckpointError, CheckpointNotFound, MalformedCheckpoint, UsageError

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_JSON_BYTES = 50_000_000
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

NUMPY_DTYPES: dict[str, str] = {
    "BOOL": "?", "U8": "u1", "I8": "i1", "I16": "<i2", "U16": "<u2", "F16": "<f2",
    "BF16": "<u2",  # numpy has no bfloat16: carried as raw bits
    "I32": "<i4", "U32": "<u4", "F32": "<f4", "I64": "<i8", "U64": "<u8", "F64": "<f8",
    "F8_E4M3": "u1", "F8_E5M2": "u1",
}  # fmt: skip


class CheckpointSource(Protocol):
    """What the checkpoint tools need from a checkpoint, wherever it lives."""

    label: str
    bytes_fetched: int

    def load_config(self) -> dict[str, Any] | None: ...

    def load_index(self) -> dict[str, Any] | None: ...

    def load_headers(self) -> dict[str, SafetensorsHeader]: ...

    def read_range(self, file: str, offset: int, length: int) -> bytes: ...

    def read_rows(self, header: SafetensorsHeader, entry: TensorEntry, start: int, stop: int) -> np.ndarray: ...


def _load_json_bytes(data: bytes, name: str) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedCheckpoint(f"{name} is not valid JSON ({exc}).", file=name) from exc
    if not isinstance(value, dict):
        raise MalformedCheckpoint(f"{name} is not a JSON object.", file=name)
    return value


def _rows_to_array(buffer: bytearray | bytes | memoryview, entry: TensorEntry, start: int, stop: int) -> np.ndarray:
    shape = (stop - start, *entry.shape[1:]) if entry.shape else ()
    return np.frombuffer(buffer, dtype=NUMPY_DTYPES[entry.dtype]).reshape(shape)


def _check_rows(entry: TensorEntry, start: int, stop: int) -> None:
    rows = entry.shape[0] if entry.shape else 1
    if not 0 <= start <= stop <= rows:
        raise CheckpointError(f"Rows {start}:{stop} are outside tensor {entry.name!r} ({rows} rows).")


class LocalSource:
    """A directory holding safetensors shards (with or without an index), or one file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise CheckpointNotFound(
                f"No checkpoint at {self.path}.", hint="Pass a local directory, a .safetensors file, or a hub repo id."
            )
        self.root = self.path if self.path.is_dir() else self.path.parent
        self.label = str(self.path)
        self.bytes_fetched = 0
        self._headers: dict[str, SafetensorsHeader] | None = None
        self._fds: dict[str, int] = {}
        self._lock = threading.Lock()  # row reads come from worker threads: the fd cache and the byte count

    def _read_json(self, name: str) -> dict[str, Any] | None:
        if not self.path.is_dir():
            return None
        file = self.root / name
        if not file.is_file():
            return None
        if file.stat().st_size > MAX_JSON_BYTES:
            raise MalformedCheckpoint(f"{file} is larger than {MAX_JSON_BYTES:,} bytes.", file=str(file))
        data = file.read_bytes()
        self.bytes_fetched += len(data)
        return _load_json_bytes(data, str(file))

    def load_config(self) -> dict[str, Any] | None:
        return self._read_json("config.json")

    def load_index(self) -> dict[str, Any] | None:
        return self._read_json(INDEX_FILE)

    def shard_names(self) -> list[str]:
        if not self.path.is_dir():
            return [self.path.name]
        index = self.load_index()
        if index is not None:
            return sorted(set(_weight_map(index, INDEX_FILE).values()))
        shards = sorted(p.name for p in self.root.glob("*.safetensors"))
        if not shards:
            raise CheckpointNotFound(
                f"{self.path} holds no .safetensors files.", hint="Point at a checkpoint directory."
            )
        return shards

    def load_headers(self) -> dict[str, SafetensorsHeader]:
        if self._headers is None:
            headers = {}
            for shard in self.shard_names():
                header = read_local_header(self.root / shard)
                self.bytes_fetched += 8 + (header.header_bytes or 0)
                headers[shard] = header
            self._headers = headers
        return self._headers

    def _fd(self, file: str) -> int:
        with self._lock:
            if file not in self._fds:
                try:
                    self._fds[file] = os.open(self.root / file, os.O_RDONLY)
                except FileNotFoundError as exc:
                    raise CheckpointNotFound(f"Shard {file} is missing from {self.root}.", file=file) from exc
            return self._fds[file]

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_fetched += n

    def read_range(self, file: str, offset: int, length: int) -> bytes:
        data = os.pread(self._fd(file), length, offset)
        if len(data) != length:
            raise MalformedCheckpoint(f"{file}: truncated read at byte {offset:,}.", file=file)
        self._count(length)
        return data

    def read_rows(self, header: SafetensorsHeader, entry: TensorEntry, start: int, stop: int) -> np.ndarray:
        _check_rows(entry, start, stop)
        buffer = np.empty((stop - start) * entry.row_bytes, dtype=np.uint8)
        return self.read_rows_into(header, entry, start, stop, buffer)

    def read_rows_into(
        self, header: SafetensorsHeader, entry: TensorEntry, start: int, stop: int, buffer: np.ndarray
    ) -> np.ndarray:
        """``read_rows`` into the caller's uint8 ``buffer`` (reused from block to block: no allocation, no page faults)."""
        _check_rows(entry, start, stop)
        offset = 8 + (header.header_bytes or 0) + entry.data_begin + start * entry.row_bytes
        view = buffer[: (stop - start) * entry.row_bytes].data
        done = 0
        while done < len(view):
            got = os.preadv(self._fd(entry.file), [view[done:]], offset + done)
            if got <= 0:
                raise MalformedCheckpoint(f"{entry.file}: truncated inside tensor {entry.name!r}.", file=entry.file)
            done += got
        self._count(len(view))
        return _rows_to_array(view, entry, start, stop)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _weight_map(index: dict[str, Any], name: str) -> dict[str, str]:
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise MalformedCheckpoint(f"{name} has no valid weight_map.", file=name)
    for shard in weight_map.values():
        if "/" in shard or "\\" in shard or shard.startswith("."):
            raise MalformedCheckpoint(f"{name} names a shard outside the checkpoint: {shard!r}.", file=name)
    return dict(weight_map)


class HubSource:
    """A hub repo, read through huggingface_hub: headers and small JSON files, tensor rows by range."""

    def __init__(self, repo_id: str, *, revision: str | None = None, api: Any = None) -> None:
        from huggingface_hub import HfApi

        self.repo_id = repo_id
        self.revision = revision
        self.api = api if api is not None else HfApi()
        self.label = f"{repo_id}@{revision}" if revision else repo_id
        self.bytes_fetched = 0
        self._headers: dict[str, SafetensorsHeader] | None = None
        self._index: dict[str, Any] | bool | None = False
        self._header_lengths: dict[str, int] = {}
        self._lock = threading.Lock()  # range reads come from worker threads: the byte count, the header lengths

    def _get(self, filename: str, byte_range: tuple[int, int] | None = None) -> bytes | None:
        """GET a file (or a byte range of it); None when the repo has no such file."""
        from huggingface_hub import get_session, hf_hub_url, hf_raise_for_status
        from huggingface_hub.utils._headers import build_hf_headers

        url = hf_hub_url(self.repo_id, filename, revision=self.revision, endpoint=self.api.endpoint)
        headers = build_hf_headers(token=self.api.token)
        if byte_range is not None:
            headers["range"] = f"bytes={byte_range[0]}-{byte_range[1] - 1}"
        with _hub_errors(self.label, filename):
            response = get_session().get(url, headers=headers, follow_redirects=True)
            if response.status_code == 404 and response.headers.get("X-Error-Code") == "EntryNotFound":
                return None
            hf_raise_for_status(response)
        data = bytes(response.content)
        if byte_range is not None and len(data) != byte_range[1] - byte_range[0]:
            raise MalformedCheckpoint(
                f"{self.label}/{filename}: asked for {byte_range[1] - byte_range[0]:,} bytes, got {len(data):,}.",
                hint="The server ignored the range request or the file is truncated.",
                file=filename,
            )
        with self._lock:
            self.bytes_fetched += len(data)
        return data

    def load_config(self) -> dict[str, Any] | None:
        data = self._get("config.json")
        return None if data is None else _load_json_bytes(data, f"{self.label}/config.json")

    def load_index(self) -> dict[str, Any] | None:
        if self._index is False:
            data = self._get(INDEX_FILE)
            self._index = None if data is None else _load_json_bytes(data, f"{self.label}/{INDEX_FILE}")
        return self._index if isinstance(self._index, dict) else None

    def load_headers(self) -> dict[str, SafetensorsHeader]:
        if self._headers is not None:
            return self._headers
        index = self.load_index()
        shards = [SINGLE_FILE] if index is None else sorted(set(_weight_map(index, INDEX_FILE).values()))
        headers = {}
        for shard in shards:
            with _hub_errors(self.label, shard):
                meta = self.api.parse_safetensors_file_metadata(self.repo_id, shard, revision=self.revision)
            raw: dict[str, Any] = {
                name: {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": list(t.data_offsets)}
                for name, t in meta.tensors.items()
            }
            raw["__metadata__"] = meta.metadata
            headers[shard] = validate_header_dict(raw, file=shard, header_bytes=None, file_size=None)
        self._headers = headers
        return headers

    def _data_start(self, file: str) -> int:
        with self._lock:
            known = self._header_lengths.get(file)
        if known is None:  # callers read a tensor's first block alone, so this runs once per file
            prefix = self._get(file, (0, 8))
            if prefix is None:
                raise CheckpointNotFound(f"{self.label} has no file {file}.", file=file)
            known = 8 + header_length(prefix, file=file, file_size=None)
            with self._lock:
                self._header_lengths[file] = known
        return known

    def read_range(self, file: str, offset: int, length: int) -> bytes:
        data = self._get(file, (offset, offset + length))
        if data is None:
            raise CheckpointNotFound(f"{self.label} has no file {file}.", file=file)
        return data

    def read_rows(self, header: SafetensorsHeader, entry: TensorEntry, start: int, stop: int) -> np.ndarray:
        _check_rows(entry, start, stop)
        offset = self._data_start(entry.file) + entry.data_begin + start * entry.row_bytes
        length = (stop - start) * entry.row_bytes
        data = self.read_range(entry.file, offset, length) if length else b""
        return _rows_to_array(data, entry, start, stop)

    def close(self) -> None:
        return None


class _hub_errors:
    """Translate huggingface_hub and transport errors into CheckpointError (the one boundary)."""

    def __init__(self, label: str, filename: str) -> None:
        self.label, self.filename = label, filename

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> Literal[False]:
        if exc is None or isinstance(exc, CheckpointError):
            return False
        from huggingface_hub import errors as hf_errors

        where = f"{self.label}/{self.filename}"
        if isinstance(exc, hf_errors.RepositoryNotFoundError):
            raise CheckpointNotFound(
                f"Hub repo {self.label} not found (or gated and no token).",
                hint="Check the repo id, accept its licence on the hub, and run `hf auth login`.",
            ) from exc
        if isinstance(exc, (hf_errors.RevisionNotFoundError, hf_errors.EntryNotFoundError)):
            raise CheckpointNotFound(f"{where} not found on the hub.", hint="Check the revision.") from exc
        if isinstance(exc, hf_errors.SafetensorsParsingError):
            raise MalformedCheckpoint(f"{where}: {exc}", file=self.filename) from exc
        if isinstance(exc, hf_errors.OfflineModeIsEnabled):
            raise CheckpointError(f"Cannot read {where}: {exc}", hint="Unset HF_HUB_OFFLINE.") from exc
        if isinstance(exc, OSError) or type(exc).__module__.startswith(("httpx", "httpcore")):
            raise CheckpointError(
                f"Reading {where} from the hub failed: {exc}", hint="Check the network and HF_ENDPOINT."
            ) from exc
        return False


def open_source(source: str, *, revision: str | None = None, hub_api: Any = None) -> LocalSource | HubSource:
    """A local path when it exists, else a hub repo id (``owner/name``, optionally ``@revision``)."""
    if os.path.exists(source):
        if revision is not None:
            # A local copy has no revisions: taking the flag silently would read something else than asked.
            raise UsageError(
                f"--revision applies to Hub repos; {source!r} is a local path.",
                hint="Drop --revision, or pass the repo id (owner/name) to read that revision from the Hub.",
            )
        return LocalSource(source)
    repo_id, _, at_revision = source.partition("@")
    if _REPO_ID.match(repo_id):
        if revision is not None and at_revision and revision != at_revision:
            raise UsageError(
                f"{source!r} and --revision {revision!r} name two revisions.",
                hint=f"Give one: {repo_id}@{revision}, or {repo_id} --revision {revision}.",
            )
        return HubSource(repo_id, revision=revision or at_revision or None, api=hub_api)
    raise CheckpointNotFound(
        f"{source!r} is neither a local path nor a hub repo id.",
        hint="Pass a directory, a .safetensors file, or owner/name (e.g. google/gemma-4-E2B-it-qat-w4a16-ct).",
    )


def tensor_locations(source: CheckpointSource) -> dict[str, tuple[SafetensorsHeader, TensorEntry]]:
    """Every tensor name -> (its shard's header, its entry); a name stored twice is an error."""
    found: dict[str, tuple[SafetensorsHeader, TensorEntry]] = {}
    for header in source.load_headers().values():
        for name, entry in header.tensors.items():
            if name in found:
                raise MalformedCheckpoint(
                    f"Tensor {name!r} is stored in both {found[name][1].file} and {entry.file}.", tensor=name
                )
            found[name] = (header, entry)
    return found
