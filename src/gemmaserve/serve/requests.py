"""The requests of ``serve start|status|stop|logs``: one model each, both front ends built from them.

:class:`StartRequest` is a :class:`~gemmaserve.host.doctor.DoctorRequest` (start runs the same checks,
for the same plan row, as its interlock) plus where and how to run vLLM. ``stop`` needs a person's
agreement in both front ends: it ends a server and the requests it is serving.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from gemmaserve.host.doctor import DoctorRequest
from gemmaserve.request_model import CHANGES_IN_PLACE, CREATES, READS, ActionRequest, Cli, Port
from gemmaserve.serve.probes import DEFAULT_PORT, READY_TIMEOUT_S
from gemmaserve.serve.supervisor import STOP_TIMEOUT_S

# vLLM flags that have their own option here: passed again through the extra arguments, vLLM would run with
# a value the plan and doctor never saw (its parser keeps the last one).
OWN_OPTIONS = (
    "--max-model-len",
    "--gpu-memory-utilization",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--language-model-only",
    "--served-model-name",
    "--port",
    "--model",
)

# No upper bound: `-n 100000` asks for the whole log, and the tail read is capped at its last 256 KiB anyway.
LogLines = Annotated[int, Field(ge=0)]


class StartRequest(DoctorRequest, action="serve start", effect=CREATES):
    """``gemmaserve serve start``: the deployment doctor checks, and where and how to run ``vllm serve``."""

    port: Port = DEFAULT_PORT
    gpu_index: Annotated[
        int,
        Field(ge=0, description="Which GPU (CUDA_VISIBLE_DEVICES); split over N, this one and the next N-1."),
    ] = 0
    served_model_name: Annotated[
        str | None, Field(description="The name clients ask for (default: the model key).")
    ] = None
    checkpoint: Annotated[
        str | None,
        Field(
            description="Load this local directory or repo instead of the catalog's repo for --encoding "
            "(the plan still comes from --model/--encoding)."
        ),
    ] = None
    wait: Annotated[
        bool, Field(description="Wait until /health answers (the engine's stage is shown while it starts).")
    ] = True
    timeout: Annotated[float, Field(ge=1, description="Seconds to wait for /health.")] = READY_TIMEOUT_S
    extra_args: Annotated[
        list[str],
        Cli(argument=True, unprocessed=True, metavar="[-- VLLM_ARGS]..."),
        Field(description="Flags passed to `vllm serve` unchanged, after the plan's (--load-format dummy, …)."),
    ] = []  # noqa: RUF012 - pydantic copies a field's default per instance; [] keeps it in the JSON schema

    @field_validator("extra_args")
    @classmethod
    def _no_second_value_for_an_option(cls, value: list[str]) -> list[str]:
        taken = sorted({arg.split("=", 1)[0] for arg in value if arg.split("=", 1)[0] in OWN_OPTIONS})
        if taken:
            options = ", ".join(taken)
            raise ValueError(
                f"{options} has its own option here: pass it as that option, not as an extra vLLM argument "
                "(the plan and doctor would check one value and vLLM would run another)"
            )
        return value


class StatusRequest(ActionRequest, action="serve status", effect=READS):
    """``gemmaserve serve status``: the state of one server, or of every server gemmaserve started here."""

    port: Port = DEFAULT_PORT
    all: Annotated[
        bool,
        Cli(cli_only="the listing has another shape than one server's status; call the tool per port"),
        Field(description="Every server gemmaserve started on this host (the CLI's listing; one line each)."),
    ] = False
    lines: Annotated[LogLines, Cli(short="-n"), Field(description="Log lines to show.")] = 10


class StopRequest(ActionRequest, action="serve stop", effect=CHANGES_IN_PLACE, confirmation=True):
    """``gemmaserve serve stop``: end the server on a port (its whole process group)."""

    port: Port = DEFAULT_PORT
    timeout: Annotated[float, Field(ge=0, description="Seconds after SIGTERM before SIGKILL.")] = STOP_TIMEOUT_S

    def describe_change(self) -> str:
        return f"stop the vLLM server on port {self.port} (and the requests it is serving)"


class LogsRequest(ActionRequest, action="serve logs", effect=READS):
    """``gemmaserve serve logs``: the engine log of the server on a port."""

    port: Port = DEFAULT_PORT
    lines: Annotated[LogLines, Cli(short="-n"), Field(description="Log lines to show.")] = 100
    follow: Annotated[
        bool,
        Cli(short="-f", cli_only="keeps a terminal printing; a tool call returns once (call again for new lines)"),
        Field(description="Keep printing new lines until interrupted (a terminal's view)."),
    ] = False
