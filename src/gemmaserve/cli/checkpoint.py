"""``gemmaserve checkpoint inspect|grid-check|repack|validate``: argument parsing only.

Each result is drawn by its view (:mod:`gemmaserve.views.checkpoint`) and its ``ok`` sets the exit status.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from gemmaserve.checkpoint.requests import GridCheckRequest, InspectRequest, RepackRequest, ValidateRequest
from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import finish
from gemmaserve.cli.progress_display import event_lines, progress_display
from gemmaserve.request_model import ActionRequest
from gemmaserve.result_model import ActionResult


@click.group(name="checkpoint")
def cli() -> None:
    """Inspect, grid-check, repack and validate Gemma 4 checkpoints."""


def _finish_with_progress(action: Callable[..., ActionResult], request: ActionRequest, *, as_json: bool) -> None:
    """Run a long action with its per-tensor progress on stderr (the one progress display), then print it."""
    with progress_display(event_lines) as progress:
        report = action(request, progress=progress)
    finish(report, as_json=as_json)


@cli.command(name="inspect")
@request_options(InspectRequest)
def inspect_cmd(request: InspectRequest, as_json: bool) -> None:
    """What SOURCE holds, by part, from safetensors headers alone (a directory, a file, or a hub repo id).

    \b
    Examples:
      gemmaserve checkpoint inspect google/gemma-4-E2B-it-qat-w4a16-ct
      gemmaserve checkpoint inspect ./e2b-w4a16 --json
      gemmaserve checkpoint inspect google/gemma-4-E2B-it --revision main
    """
    from gemmaserve.checkpoint import checkpoint_inspect

    finish(checkpoint_inspect(request), as_json=as_json)


@cli.command(name="grid-check")
@request_options(GridCheckRequest)
def grid_check_cmd(request: GridCheckRequest, as_json: bool) -> None:
    """Whether BUILD's 4-bit weights are Google's QAT values; exits 1 when any is off by a level of the reference's grid.

    Also exits 1 when a value is NaN or infinite (verdict invalid), and, with no verdict, when the reference sits
    on no 4-bit grid.

    \b
    Examples:
      gemmaserve checkpoint grid-check ./w4a16 --reference google/gemma-4-E2B-it-qat-q4_0-unquantized
      gemmaserve checkpoint grid-check ./e2b-awq --reference ./e2b-qat-q4_0-unquantized --layers 0,3-5
      gemmaserve checkpoint grid-check ./e2b-awq --reference ./e2b-qat-q4_0-unquantized --json \\
        --tensor model.language_model.layers.0.self_attn.q_proj --reference-group-size 32
    """
    from gemmaserve.checkpoint import checkpoint_grid_check

    _finish_with_progress(checkpoint_grid_check, request, as_json=as_json)


@cli.command(name="repack")
@request_options(RepackRequest)
def repack_cmd(request: RepackRequest, as_json: bool) -> None:
    """Repack a -qat-q4_0-unquantized SRC into compressed-tensors W4A16 at OUT, losslessly, or write nothing.

    OUT must not exist: the repack is written beside it and moved into place only when complete.

    \b
    Examples:
      gemmaserve checkpoint repack ./e2b-qat-q4_0-unquantized ./e2b-w4a16
      gemmaserve checkpoint repack ./e2b-qat-q4_0-unquantized ./e2b-text-w4a16 --text-only --json
    """
    from gemmaserve.checkpoint import checkpoint_repack

    _finish_with_progress(checkpoint_repack, request, as_json=as_json)


@cli.command(name="validate")
@request_options(ValidateRequest)
def validate_cmd(request: ValidateRequest, as_json: bool) -> None:
    """Check SOURCE's config against its shards before a deploy; exits 1 on any failed finding.

    \b
    Examples:
      gemmaserve checkpoint validate ./e2b-w4a16
      gemmaserve checkpoint validate google/gemma-4-E2B-it-qat-w4a16-ct --json
    """
    from gemmaserve.checkpoint import checkpoint_validate

    finish(checkpoint_validate(request), as_json=as_json)
