"""``gemmaserve plan``: the capacity and cost table, offline on the built-in catalog (its view:
:mod:`gemmaserve.views.plan`)."""

from __future__ import annotations

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import finish
from gemmaserve.plan import PlanRequest, plan


@click.command(name="plan")
@request_options(PlanRequest)
@click.option("--wide", is_flag=True, help="Every column (instance, dtype, weights, host RAM, swap, disk, clamp, …).")
def cli(request: PlanRequest, wide: bool, as_json: bool) -> None:
    """Which Gemma 4 model, encoding and GPU fit, with KV pool, host RAM, swap, disk and cost.

    With no options: every model × encoding × GPU in the built-in catalog, for the first
    start of the newest supported vLLM.

    \b
    Examples:
      gemmaserve plan --model e2b --gpu t4
      gemmaserve plan --instance ml.g4dn.xlarge --max-model-len 4096 --wide
      gemmaserve plan --model e4b --concurrency 16 --sort cost
      gemmaserve plan --model e2b --encoding qat-w4a16 --gpu t4 --decode-rate 38.5 --json
      gemmaserve plan --sort cost --from-bench results/
      gemmaserve plan --model 31b --encoding bf16 --gpu l4 --tensor-parallel-size 4
    """
    table = plan(request)
    if wide and not as_json:
        from gemmaserve.views.plan import WidePlanTable

        table = WidePlanTable.model_construct(table.model_fields_set, **dict(table))
    finish(table, as_json=as_json)
