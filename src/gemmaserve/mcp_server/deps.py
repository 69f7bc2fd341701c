"""The seams the MCP tools reach the world through: AWS clients, the clock, sleeping.

``gemmaserve mcp`` uses the defaults; tests pass a client factory pointed at moto's
server and a fast sleep. Nothing is built at import: boto3 loads on first AWS tool call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gemmaserve.progress import utc_now


def _doctor_supplied_by_start() -> Any:
    raise AssertionError("serve.api.start replaces the launch seams' doctor with its own run")


@dataclass
class ServerDeps:
    """What the tools use instead of globals. ``aws_clients`` is a ``ClientFactory`` (service, region) → client."""

    aws_clients: Any | None = None
    now: Callable[[], datetime] = utc_now
    # None: real time, cut short by the request's cancel token. Tests pass a scripted sleep (the library
    # checks the token around it).
    sleep: Callable[[float], None] | None = None
    # How sagemaker preflight checks a model id on the Hub (None: the real HTTP check).
    check_model: Any | None = None
    # Where doctor (and the serve interlock) read the host from: a ``DoctorSources`` (None: this host).
    doctor_sources: Any | None = None
    # serve_start: the ``vllm`` command (None: next to the target interpreter) and the launch seams.
    vllm_command: list[str] | None = None
    launch: Any | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def clients(self) -> Any:
        """The AWS client factory, built on first use (honours GEMMASERVE_AWS_ENDPOINT_URL)."""
        with self._lock:
            if self.aws_clients is None:
                from gemmaserve.sagemaker.aws import Boto3ClientFactory

                self.aws_clients = Boto3ClientFactory()
            return self.aws_clients

    def launch_seams(self) -> Any:
        """A ``LaunchSeams`` (its doctor is replaced by ``serve.api.start`` with the real check)."""
        if self.launch is not None:
            return self.launch
        from gemmaserve.serve.launcher import LaunchSeams

        return LaunchSeams(doctor=_doctor_supplied_by_start)

    def model_checker(self) -> Any:
        if self.check_model is not None:
            return self.check_model
        from gemmaserve.sagemaker.deployment.preflight import hub_reachability

        return hub_reachability
