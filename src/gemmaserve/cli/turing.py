"""``gemmaserve turing status|apply|verify|revert|smem``: thin front end over gemmaserve.turing.

Options come from the request models in :mod:`gemmaserve.turing.requests`; apply and revert ask first
(``--yes`` off a terminal), their dry runs do not.
"""

from __future__ import annotations

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import finish
from gemmaserve.cli.progress_display import event_lines, progress_display
from gemmaserve.turing.requests import (
    ApplyRequest,
    RevertRequest,
    SmemRequest,
    TuringStatusRequest,
    VerifyRequest,
)


@click.group(name="turing")
def cli() -> None:
    """The Turing (T4, sm_75) shared-memory clamp for vLLM's Triton attention kernel."""


@cli.command()
@request_options(ApplyRequest)
def apply(request: ApplyRequest, as_json: bool) -> None:
    """Insert the clamp into the installed vLLM file (once; backup beside it).

    --dry-run shows the diff.

    \b
    Examples:
      gemmaserve turing apply --dry-run
      gemmaserve turing apply --yes
      gemmaserve turing apply --python /opt/vllm/bin/python --yes
    """
    from gemmaserve.turing.filepatch import apply_clamp

    finish(apply_clamp(request), as_json=as_json)


@cli.command()
@request_options(RevertRequest)
def revert(request: RevertRequest, as_json: bool) -> None:
    """Restore the vLLM file byte for byte.

    --dry-run shows the diff.

    \b
    Examples:
      gemmaserve turing revert --dry-run
      gemmaserve turing revert --yes
      gemmaserve turing revert --file ./triton_unified_attention.py --yes
    """
    from gemmaserve.turing.filepatch import revert_clamp

    finish(revert_clamp(request), as_json=as_json)


@cli.command()
@request_options(VerifyRequest)
def verify(request: VerifyRequest, as_json: bool) -> None:
    """Is the file patch present and intact? Exit 0 only when it is.

    \b
    Examples:
      gemmaserve turing verify
      gemmaserve turing verify --python /opt/vllm/bin/python --json
    """
    from gemmaserve.turing.filepatch import verify_clamp

    finish(verify_clamp(request), as_json=as_json)


@cli.command()
@request_options(TuringStatusRequest)
def status(request: TuringStatusRequest, as_json: bool) -> None:
    """Is the clamp needed here, which delivery is active, would vLLM start? Exit 0 only if it would.

    \b
    Examples:
      gemmaserve turing status
      gemmaserve turing status --capability 7.5 --python /opt/vllm/bin/python --json
    """
    from gemmaserve.turing.status import check_status

    finish(check_status(request), as_json=as_json)


@cli.command()
@request_options(SmemRequest)
def smem(request: SmemRequest, as_json: bool) -> None:
    """Compile the real kernel for ARCH (no GPU needed): shared memory, registers, spills, stock vs clamped.

    Needs the kernel extra (pip install "gemmaserve[kernel]"), and vLLM's kernel file: the installed
    vLLM's, or any release's copy given with --vllm-file (no vLLM install needed).

    \b
    Examples:
      gemmaserve turing smem
      gemmaserve turing smem --vllm-file ./triton_unified_attention.py --head-size 512
      gemmaserve turing smem --arch sm_89 --json
      gemmaserve turing smem --search --vllm-file ./triton_unified_attention.py
    """
    from gemmaserve.turing.smem import compile_smem

    # Each compile with the launches left and an ETA (a cold run compiles for a minute or more): redrawn on a
    # terminal; in a log a line when the run starts, then one every 30 s.
    with progress_display(event_lines) as progress:
        result = compile_smem(request, progress=progress)
    finish(result, as_json=as_json)
