"""The deploy journal: what a run is about to create in SageMaker, written down before it is sent.

A process can die where no handler runs (SIGKILL, the OOM killer, a power cut) between sending a
Create call and deleting what it made; SageMaker keeps billing for an endpoint nobody remembers.
So before each Create a deploy appends an entry — region, kind, name, owner and the ``created-at``
tag it carries — and marks it when the outcome is known: ``done`` (the deploy finished: the
resource is the user's now), ``deleted`` or ``absent`` (its teardown removed it or found it gone),
``left`` (its teardown could not delete it) or ``unconfirmed`` (sent, never seen within the
in-flight window). An entry still ``sent`` whose process is gone, or ``left``/``unconfirmed``, is
*open*: ``sagemaker list`` shows it and ``sagemaker cleanup --journal`` settles it by name (deleted
if it is there and carries that run's tags, closed if SageMaker says it is absent).

The journal is one JSON file in gemmaserve's state directory, rewritten atomically under a lock
(several deploys may run at once), so a crash mid-write leaves the previous version whole.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import uuid
from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel

from gemmaserve.fileio import write_atomic
from gemmaserve.progress import utc_now
from gemmaserve.state import state_dir

JOURNAL_NAME = "sagemaker-journal.json"


class EntryState(StrEnum):
    SENT = "sent"  # the Create is about to go, is in flight, or was made by a run still going
    DONE = "done"  # the deploy finished: the resource is the user's
    DELETED = "deleted"
    ABSENT = "absent"
    LEFT = "left"  # a teardown could not delete it
    UNCONFIRMED = "unconfirmed"  # sent, not seen within the in-flight window: SageMaker may still make it


CLOSED = frozenset({EntryState.DONE, EntryState.DELETED, EntryState.ABSENT})


class JournalEntry(BaseModel):
    id: str
    region: str
    kind: str  # model, endpoint-config or endpoint
    name: str
    owner: str | None
    created_tag: str | None  # the run's gemmaserve:created-at tag: tells its resource from a later one's
    pid: int
    host: str
    sent_at: datetime
    state: EntryState = EntryState.SENT
    updated_at: datetime

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"

    def process_alive(self) -> bool:
        """Whether the process that wrote this entry still runs (never assumed dead on another host)."""
        if self.host != socket.gethostname():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def is_open(self) -> bool:
        """Something may be billing that no running process will settle."""
        if self.state in CLOSED:
            return False
        return self.state is not EntryState.SENT or not self.process_alive()


class Journal:
    """The journal file; each method reads, changes and writes it back under an exclusive lock."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else state_dir() / JOURNAL_NAME

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[JournalEntry]]:
        lock_path = self.path.with_suffix(".lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                entries = self._read()
                before = [entry.model_dump(mode="json") for entry in entries]
                yield entries
                after = [entry.model_dump(mode="json") for entry in entries]
                if after != before:
                    write_atomic(self.path, json.dumps({"entries": after}, indent=1) + "\n", mode=0o600)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> list[JournalEntry]:
        try:
            document = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as error:
            from gemmaserve.errors import GemmaserveError

            raise GemmaserveError(
                f"The deploy journal {self.path} cannot be read ({error}): what earlier runs sent is unknown.",
                hint=f"Look at it, move it aside and check with: gemmaserve sagemaker list --all-regions "
                f"(it lists every tagged resource); the journal starts again empty once {self.path} is gone.",
            ) from error
        return [JournalEntry.model_validate(item) for item in document.get("entries", [])]

    def entries(self) -> list[JournalEntry]:
        with self._locked() as entries:
            return list(entries)

    def sending(self, *, region: str, kind: str, name: str, owner: str | None, created_tag: str | None) -> str:
        """Write down a Create about to be sent; returns the entry's id."""
        now = utc_now()
        entry = JournalEntry(
            id=uuid.uuid4().hex[:12],
            region=region,
            kind=kind,
            name=name,
            owner=owner,
            created_tag=created_tag,
            pid=os.getpid(),
            host=socket.gethostname(),
            sent_at=now,
            updated_at=now,
        )
        with self._locked() as entries:
            entries.append(entry)
        return entry.id

    def mark(self, entry_id: str, state: EntryState, *, now: datetime | None = None) -> None:
        with self._locked() as entries:
            for entry in entries:
                if entry.id == entry_id:
                    entry.state = state
                    entry.updated_at = now or utc_now()

    def open_entries(self) -> list[JournalEntry]:
        return [entry for entry in self.entries() if entry.is_open()]

    def prune(self, *, keep_closed: int = 200) -> None:
        """Drop the oldest closed entries beyond ``keep_closed`` (the journal must not grow forever)."""
        with self._locked() as entries:
            closed = [entry for entry in entries if entry.state in CLOSED]
            for entry in closed[: max(len(closed) - keep_closed, 0)]:
                entries.remove(entry)
