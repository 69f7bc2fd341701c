"""Every error gemmaserve raises on purpose, rooted in :class:`GemmaserveError`.

Each error carries the fix (``hint``) and fields that JSON and MCP report as
data; each also inherits the matching built-in so callers can catch either.
Only adapters translate foreign exceptions (botocore, aiohttp, OSError) into
these; front ends map them to ``Error: …`` and an exit code in one table.

    GemmaserveError
    ├── UsageError (ValueError)                 exit 2: the user asked for something invalid
    │   ├── UnknownName (KeyError-like)         a model / encoding / GPU / instance not in the catalog
    │   └── ConfirmationRequired                destructive action without --yes on a non-terminal
    ├── MissingExtra (ImportError)              an optional dependency is not installed
    ├── CatalogError                            the packaged catalog data is inconsistent
    ├── HostCheckFailed                         doctor found failing checks
    ├── InterlockRefused                        a step refused because a check it depends on did not pass
    ├── ServeError
    │   ├── ServerAlreadyRunning
    │   ├── ServerNotRunning
    │   └── ServerDied
    ├── TuringError
    │   ├── UnrecognisedSource (ValueError)     exit 2: a vLLM file whose shape we do not know
    │   ├── UnsupportedVllmVersion              exit 2: a vLLM release outside the supported range
    │   ├── PatchConflict                       edited by hand since the patch, patched twice, locked
    │   └── FileNotWritable (PermissionError)
    ├── AwsError                                fields: aws_error_code, request_id, region
    │   ├── EndpointNotFound (LookupError)
    │   ├── EndpointFailed
    │   ├── QuotaExceeded
    │   ├── CapacityUnavailable
    │   ├── CredentialsMissing
    │   ├── AwsResourceNotFound (LookupError)   a model, config, role, repository, quota that is not there
    │   ├── AwsAccessDenied (PermissionError)
    │   ├── ModelStreamFailed                   an error event in a SageMaker response stream
    │   ├── DeployInterrupted                   exit 130: Ctrl-C or a signal stopped a deploy; fields say what is left
    │   └── SageMakerTimedOut (TimeoutError)    a wait ran past its bound
    ├── BenchError
    │   ├── TargetUnreachable (ConnectionError)
    │   ├── ResultFileInvalid (ValueError)
    │   └── ClientSaturated                     the client's own event loop lagged past the timing budget
    └── CheckpointError
        ├── CheckpointNotFound (FileNotFoundError)
        ├── MalformedCheckpoint (ValueError)
        └── OffGrid                             a repack refused because a group is off the QAT grid
"""

from __future__ import annotations

from typing import Any, ClassVar


class GemmaserveError(Exception):
    """Base of every expected failure. ``hint`` says what to do next."""

    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, hint: str | None = None, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.fields = fields

    def to_dict(self) -> dict[str, Any]:
        """The error as data, for ``--json`` and MCP error results."""
        return {
            "error": type(self).__name__,
            "message": self.message,
            "hint": self.hint,
            **{k: v for k, v in self.fields.items() if v is not None},
        }


# --- usage -----------------------------------------------------------------


class UsageError(GemmaserveError, ValueError):
    exit_code = 2


class UnknownName(UsageError):
    """A name that is not in the catalog: the message lists the valid ones once; the hint names the nearest."""

    def __init__(self, kind: str, name: str, valid: list[str], *, of: str | None = None) -> None:
        import difflib

        near = difflib.get_close_matches(name.strip().lower(), [v.lower() for v in valid], n=1, cutoff=0.8)
        suggestion = next((v for v in valid if near and v.lower() == near[0]), None)
        owner = f" of {of}" if of else ""
        super().__init__(
            f"Unknown {kind}{owner} {name!r}. Valid {kind}s{owner}: {', '.join(valid)}",
            hint=f"Did you mean {suggestion!r}?" if suggestion else "Pick one of the names listed.",
            kind=kind,
            name=name,
            valid=valid,
            suggestion=suggestion,
        )


class ConfirmationRequired(UsageError):
    pass


class MissingExtra(GemmaserveError, ImportError):
    def __init__(self, module: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the Python package {module!r}, which is not installed.",
            hint=f'pip install "gemmaserve[{extra}]"',
            module=module,
            extra=extra,
        )


class CatalogError(GemmaserveError):
    pass


# --- host, interlocks, local serving ---------------------------------------


class HostCheckFailed(GemmaserveError):
    pass


class InterlockRefused(GemmaserveError):
    """A step refused to run; ``reasons`` lists each failed precondition."""


class ServeError(GemmaserveError):
    pass


class ServerAlreadyRunning(ServeError):
    pass


class ServerNotRunning(ServeError):
    pass


class ServerDied(ServeError):
    pass


# --- the Turing clamp --------------------------------------------------------


class TuringError(GemmaserveError):
    pass


class UnrecognisedSource(TuringError, ValueError):
    exit_code = 2


class UnsupportedVllmVersion(TuringError):
    exit_code = 2


class PatchConflict(TuringError):
    pass


class FileNotWritable(TuringError, PermissionError):
    pass


# --- AWS ---------------------------------------------------------------------


class AwsError(GemmaserveError):
    pass


class EndpointNotFound(AwsError, LookupError):
    pass


class EndpointFailed(AwsError):
    pass


class QuotaExceeded(AwsError):
    pass


class CapacityUnavailable(AwsError):
    pass


class CredentialsMissing(AwsError):
    pass


class AwsResourceNotFound(AwsError, LookupError):
    pass


class AwsAccessDenied(AwsError, PermissionError):
    pass


class ModelStreamFailed(AwsError):
    pass


class SageMakerTimedOut(AwsError, TimeoutError):
    pass


class UpdateRolledBack(AwsError):
    """An endpoint update went back to the old config (the gate, an alarm or a failed health check); says why."""


class DeployInterrupted(AwsError):
    """Ctrl-C or SIGTERM/SIGHUP stopped a deploy; ``deleted`` and ``remaining`` say what the teardown did."""

    exit_code = 130


# --- benchmark -------------------------------------------------------------


class BenchError(GemmaserveError):
    pass


class TargetUnreachable(BenchError, ConnectionError):
    pass


class ResultFileInvalid(BenchError, ValueError):
    pass


class ClientSaturated(BenchError):
    """The benchmark client itself was the limit: its timestamps lag, so its latencies are not reported."""


# --- checkpoints -------------------------------------------------------------


class CheckpointError(GemmaserveError):
    pass


class CheckpointNotFound(CheckpointError, FileNotFoundError):
    pass


class MalformedCheckpoint(CheckpointError, ValueError):
    pass


class OffGrid(CheckpointError):
    pass
