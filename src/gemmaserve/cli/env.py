"""``gemmaserve env``: versions of gemmaserve, Python and the packages it uses."""

from __future__ import annotations

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import finish
from gemmaserve.envinfo import EnvRequest, collect_env


@click.command(name="env")
@request_options(EnvRequest)
def cli(request: EnvRequest, as_json: bool) -> None:
    """Print versions of gemmaserve and its dependencies, for bug reports.

    \b
    Examples:
      gemmaserve env
      gemmaserve env --json > env.json
    """
    finish(collect_env(request), as_json=as_json)
