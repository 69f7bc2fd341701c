"""Delete an endpoint, then its config, then its model(s); wait (bounded) while it is Creating; idempotent.

Missing pieces are fine: deleting twice, or after a partial deploy, succeeds.
A ``Creating`` endpoint cannot be deleted, so we wait for it instead of giving up.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic import BaseModel, Field

from gemmaserve.errors import AwsError, SageMakerTimedOut, UsageError
from gemmaserve.fileio import write_atomic
from gemmaserve.progress import ProgressEvent, utc_now
from gemmaserve.result_model import ActionResult
from gemmaserve.sagemaker.aws import Deps, call, is_not_found, paginate
from gemmaserve.sagemaker.operations.status import EndpointStatus, describe_endpoint_state
from gemmaserve.sagemaker.spec.container import (
    TOOL_KEY,
    config_name_for,
    is_ours,
    model_name_for,
    tags_to_dict,
    validate_name,
)
from gemmaserve.sagemaker.spec.requests import DeleteRequest
from gemmaserve.state import state_dir

DELETE_POLL_S = 15.0  # between reads of a busy endpoint before it can be deleted


class DeleteReport(ActionResult):
    endpoint_name: str
    region: str
    dry_run: bool = False
    deleted: list[str] = Field(default_factory=list)  # "endpoint:NAME", "endpoint-config:NAME", "model:NAME"
    absent: list[str] = Field(default_factory=list)
    # Still there after this run (abandoned, refused, or a failed call)
    remaining: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # left alone on purpose: not ours, or used by another endpoint
    # A Create sent when the run stopped whose resource did not show within the in-flight window: neither
    # deleted nor known absent (SageMaker may still have made it): the report's commands look again and delete it.
    unconfirmed: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)  # what finishes the job when ``remaining`` is not empty
    waited_s: float = 0.0


@dataclass
class Removal:
    """Exactly what to delete in one region, endpoint first, and how to wait while the endpoint is busy."""

    region: str
    endpoint: str | None = None
    configs: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    busy_timeout_s: float = 1800.0
    poll_s: float = DELETE_POLL_S


def delete_deployment(sm: Any, request: DeleteRequest, deps: Deps, poll_s: float = DELETE_POLL_S) -> DeleteReport:
    """Delete the endpoint and every config and model it uses (plus the ones a deploy derives from its name).

    Refuses (UsageError) when any of them exists without gemmaserve's tags, unless ``request.force``.
    A config or model that another endpoint uses is never deleted, ``force`` or not: it is
    listed in ``skipped``. While the endpoint is busy, polls every ``poll_s`` up to ``busy_timeout_s``.
    """
    endpoint_name, region = validate_name(request.endpoint_name), request.chosen_region()
    dry_run, force = request.dry_run, request.force
    report = DeleteReport(endpoint_name=endpoint_name, region=region, dry_run=dry_run)
    state = describe_endpoint_state(sm, endpoint_name, region=region, now=deps.now())
    configs = [config_name_for(endpoint_name)] if len(endpoint_name) <= 56 else []
    if state.config_name and state.config_name not in configs:
        configs.insert(0, state.config_name)
    models: list[str] = []
    for config in configs:
        models.extend(model for model in _models_of_config(sm, config, region) if model not in models)
    if len(endpoint_name) <= 56 and model_name_for(endpoint_name) not in models:
        models.append(model_name_for(endpoint_name))
    endpoint = endpoint_name if state.status is not EndpointStatus.NOT_FOUND else None
    arns = {
        "endpoint": {endpoint_name: state.arn} if endpoint and state.arn else {},
        "endpoint-config": _arns(sm, region, "endpoint-config", configs),
        "model": _arns(sm, region, "model", models),
    }
    foreign = [
        f"{kind}:{name}"
        for kind, found in arns.items()
        for name, arn in found.items()
        if not is_ours(tags_to_dict(call(region, sm.list_tags, ResourceArn=arn).get("Tags", [])))
    ]
    if foreign and not force:
        raise UsageError(
            f"Refusing to delete {', '.join(foreign)} in {region}: gemmaserve did not create "
            f"{'it' if len(foreign) == 1 else 'them'} (no {TOOL_KEY} tag).",
            hint=f"Check with: aws sagemaker list-tags --region {region} --resource-arn <arn>; delete anyway "
            f"with: gemmaserve sagemaker delete {endpoint_name} --region {region} --force",
            endpoint_name=endpoint_name,
            region=region,
            not_ours=foreign,
        )
    used_configs, used_models = usage_by_other_endpoints(sm, region, exclude=endpoint_name)
    for config in [c for c in configs if c in used_configs]:
        configs.remove(config)
        report.skipped.append(f"endpoint-config:{config} (used by endpoint {used_configs[config]})")
    for model in [m for m in models if m in used_models]:
        models.remove(model)
        report.skipped.append(f"model:{model} (used by endpoint {used_models[model]})")
    if dry_run:  # a preview names only what is there; the rest is already absent
        for kind, names in (("endpoint-config", configs), ("model", models)):
            for name in [name for name in names if name not in arns[kind]]:
                names.remove(name)
                report.absent.append(f"{kind}:{name}")
    removal = Removal(region, endpoint, configs, models, busy_timeout_s=request.busy_timeout_s, poll_s=poll_s)
    delete_resources(sm, removal, report, deps, dry_run=dry_run)
    if state.status is EndpointStatus.NOT_FOUND:
        report.absent.insert(0, f"endpoint:{endpoint_name}")
    return report


def arn_of(sm: Any, region: str, kind: str, name: str) -> str | None:
    """The ARN of the model / endpoint-config / endpoint of this name, None when SageMaker says it does not
    exist (a Describe call; any other error is raised)."""
    method, param, key = {
        "model": (sm.describe_model, "ModelName", "ModelArn"),
        "endpoint-config": (sm.describe_endpoint_config, "EndpointConfigName", "EndpointConfigArn"),
        "endpoint": (sm.describe_endpoint, "EndpointName", "EndpointArn"),
    }[kind]
    try:
        return str(call(region, method, **{param: name})[key])
    except AwsError as error:
        if is_not_found(error):
            return None
        raise


def _arns(sm: Any, region: str, kind: str, names: list[str]) -> dict[str, str]:
    """The ARN of each of ``names`` that exists; the missing are left out."""
    found = {name: arn_of(sm, region, kind, name) for name in names}
    return {name: arn for name, arn in found.items() if arn is not None}


def usage_by_other_endpoints(
    sm: Any, region: str, *, exclude: str | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """Config name → an endpoint using it, and model name → an endpoint using it (endpoints other than ``exclude``)."""
    configs: dict[str, str] = {}
    models: dict[str, str] = {}
    for page in paginate(region, sm, "list_endpoints"):
        for summary in page.get("Endpoints", []):
            name = summary["EndpointName"]
            if name == exclude:
                continue
            try:
                config = call(region, sm.describe_endpoint, EndpointName=name).get("EndpointConfigName")
            except AwsError as error:
                if is_not_found(error):
                    continue  # deleted meanwhile
                raise
            if not config:
                continue
            configs.setdefault(config, name)
            for model in _models_of_config(sm, config, region):
                models.setdefault(model, name)
    return configs, models


def delete_resources(
    sm: Any, removal: Removal, report: DeleteReport, deps: Deps | None = None, *, dry_run: bool = False
) -> DeleteReport:
    """Delete exactly these resources, endpoint first; used by delete and by a deploy's teardown.

    ``deps``: the clock, sleep (None: ``time.sleep``) and progress of the wait while the endpoint is busy.
    """
    region, endpoint = removal.region, removal.endpoint
    if endpoint is not None:
        if dry_run:
            report.deleted.append(f"endpoint:{endpoint}")
        else:
            _wait_until_deletable(sm, removal, report, deps or Deps())
            _delete_one(report, f"endpoint:{endpoint}", region, sm.delete_endpoint, EndpointName=endpoint)
    for config in removal.configs:
        if dry_run:
            report.deleted.append(f"endpoint-config:{config}")
        else:
            _delete_one(
                report, f"endpoint-config:{config}", region, sm.delete_endpoint_config, EndpointConfigName=config
            )
    for model in removal.models:
        if dry_run:
            report.deleted.append(f"model:{model}")
        else:
            _delete_one(report, f"model:{model}", region, sm.delete_model, ModelName=model)
    return report


def _wait_until_deletable(sm: Any, removal: Removal, report: DeleteReport, deps: Deps) -> None:
    endpoint, region, busy_timeout_s = str(removal.endpoint), removal.region, removal.busy_timeout_s
    now, sleep, progress = deps.now, deps.real_sleep(), deps.progress
    started = now()
    while True:
        state = describe_endpoint_state(sm, endpoint, region=region, now=now())
        if not state.status.busy:
            return
        waited = (now() - started).total_seconds()
        report.waited_s = waited
        if waited >= busy_timeout_s:
            raise SageMakerTimedOut(
                f"Endpoint {endpoint!r} is still {state.status.value} after {waited / 60:.0f} min; "
                "SageMaker refuses to delete it until that ends.",
                hint=f"Run again later: gemmaserve sagemaker delete {endpoint} --region {region} --yes",
                endpoint_name=endpoint,
                region=region,
                status=state.status.value,
            )
        if progress is not None:
            progress(
                ProgressEvent(
                    state.status.value,
                    f"{endpoint} is {state.status.value}; SageMaker cannot delete it yet — "
                    f"waiting ({waited / 60:.1f} min)",
                    done=waited,
                    total=busy_timeout_s,
                )
            )
        sleep(removal.poll_s)


def _delete_one(report: DeleteReport, label: str, region: str, method: Any, **params: Any) -> None:
    try:
        call(region, method, **params)
    except AwsError as error:
        if is_not_found(error):
            report.absent.append(label)
            return
        raise
    report.deleted.append(label)


def _models_of_config(sm: Any, config: str, region: str) -> list[str]:
    try:
        described = call(region, sm.describe_endpoint_config, EndpointConfigName=config)
    except AwsError as error:
        if is_not_found(error):
            return []
        raise
    models: list[str] = []
    for variant in described.get("ProductionVariants", []):
        names = [variant.get("ModelName")] + [
            pool.get("ModelNameOverride") for pool in variant.get("InstancePools") or []
        ]
        models.extend(name for name in names if name and name not in models)
    return models


# --- journal ---
# The deploy journal: what a run is about to create in SageMaker, written down before it is sent.
#
# A process can die where no handler runs (SIGKILL, the OOM killer, a power cut) between sending a
# Create call and deleting what it made; SageMaker keeps billing for an endpoint nobody remembers.
# So before each Create a deploy appends an entry — region, kind, name, owner and the ``created-at``
# tag it carries — and marks it when the outcome is known: ``done`` (the deploy finished: the
# resource is the user's now), ``deleted`` or ``absent`` (its teardown removed it or found it gone),
# ``left`` (its teardown could not delete it) or ``unconfirmed`` (sent, never seen within the
# in-flight window). An entry still ``sent`` whose process is gone, or ``left``/``unconfirmed``, is
# *open*: ``sagemaker list`` shows it and ``sagemaker cleanup --journal`` settles it by name (deleted
# if it is there and carries that run's tags, closed if SageMaker says it is absent).
#
# The journal is one JSON file in gemmaserve's state directory, rewritten atomically under a lock
# (several deploys may run at once), so a crash mid-write leaves the previous version whole.


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


# --- interrupts ---
# Signals during a deploy: SIGTERM and SIGHUP stop it like Ctrl-C, and a teardown is not dropped by one more press.
#
# A closed terminal (SIGHUP, unless the process was started with it ignored, as ``nohup`` does), a
# dropped SSH session or a supervisor's SIGTERM would kill the process with a billing endpoint
# behind it; here they raise :class:`SignalInterrupt`
# (a ``KeyboardInterrupt``) so the deploy's own cleanup runs. During a teardown the first
# further signal only says the teardown goes on; the next one abandons it, and the caller
# reports what is left. Handlers are installed only on the main thread (Python's rule);
# elsewhere (the MCP server's worker threads) these are no-ops.


_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class SignalInterrupt(KeyboardInterrupt):
    """A stop signal, raised where the program was, so ``except BaseException`` cleanup runs."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class TeardownAbandoned(KeyboardInterrupt):
    """The user pressed Ctrl-C (or sent a stop signal) twice while a teardown was running."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def live_stop_signals() -> tuple[int, ...]:
    """The stop signals this process reacts to: not those it was started with ignored.

    ``nohup`` starts a program with SIGHUP ignored so that it outlives its terminal, and a shell's
    ``&`` does the same to SIGINT; catching them anyway would turn that promise into a teardown.
    """
    return tuple(number for number in _STOP_SIGNALS if signal.getsignal(number) is not signal.SIG_IGN)


def signal_name(exc: BaseException) -> str:
    """``SIGTERM`` for a signal interrupt, ``SIGINT`` (Ctrl-C) for a plain KeyboardInterrupt."""
    return getattr(exc, "signal_name", "SIGINT")


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _handlers(handler: Callable[[int, FrameType | None], Any], signals: tuple[int, ...]) -> Iterator[None]:
    if not _on_main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in signals}
    for number in signals:
        signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            # None: a handler installed outside Python; the default is the closest we can restore.
            signal.signal(number, old if old is not None else signal.SIG_DFL)


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`SignalInterrupt` (Ctrl-C keeps raising KeyboardInterrupt)."""

    def handler(number: int, _frame: FrameType | None) -> None:
        raise SignalInterrupt(signal.Signals(number).name)

    signals = tuple(number for number in live_stop_signals() if number != signal.SIGINT)
    with _handlers(handler, signals):
        yield


@contextlib.contextmanager
def shielded_teardown(notify: Callable[[str], None], *, finish_hint: str) -> Iterator[None]:
    """While inside, the first stop signal is reported and ignored; the second raises :class:`TeardownAbandoned`."""
    presses: list[str] = []

    def handler(number: int, _frame: FrameType | None) -> None:
        name = signal.Signals(number).name
        presses.append(name)
        if len(presses) == 1:
            notify(
                f"{name} received: the teardown continues so nothing is left billing. Press Ctrl-C once more "
                f"to abandon it (then finish it with: {finish_hint})."
            )
            return
        raise TeardownAbandoned(name)

    with _handlers(handler, live_stop_signals()):
        yield
