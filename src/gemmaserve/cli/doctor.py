"""``gemmaserve doctor``: the host and target-interpreter checks as a table or ``--json``; exit 1 when not ok.

Its view (:mod:`gemmaserve.views.host`) prints the fixes' shell commands under the table, one to a line
and never wrapped, so each can be pasted whole.
"""

from __future__ import annotations

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import finish
from gemmaserve.host.doctor import DoctorRequest


@click.command(name="doctor")
@request_options(DoctorRequest)
def cli(request: DoctorRequest, as_json: bool) -> None:
    """Check this GPU host and a target interpreter, cheapest failure first.

    The plan is made once, for the GPU found here (or --gpu) and the target interpreter's vLLM (or
    --vllm), and every check judges that plan. Exit 0 when every required check passed, 1 otherwise
    (unknown counts as not passed).

    \b
    Examples:
      gemmaserve doctor
      gemmaserve doctor --python ~/vllm/bin/python --model e2b --encoding bf16
      gemmaserve doctor --gpu t4 --max-model-len 4096 --language-model-only --json
    """
    from gemmaserve.host.doctor import doctor

    finish(doctor(request), as_json=as_json)
