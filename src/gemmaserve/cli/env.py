"""``gemmaserve env``: versions of gemmaserve, Python and the packages it uses."""

from __future__ import annotations

import click

from gemmaserve.cli.options import request_options
from gemmaserve.cli.output import emit, json_option
from gemmaserve.envinfo import EnvReport, EnvRequest, collect_env


@click.command(name="env")
@request_options(EnvRequest)
@json_option
def cli(request: EnvRequest, as_json: bool) -> None:
    """Print versions of gemmaserve and its dependencies, for bug reports.

    \b
    Examples:
      gemmaserve env
      gemmaserve env --json > env.json
    """
    emit(collect_env(request), as_json=as_json, render=_render)


def _render(report: EnvReport) -> None:
    click.echo(f"gemmaserve {report.gemmaserve}")
    click.echo(f"python     {report.python} ({report.executable})")
    click.echo(f"platform   {report.platform}")
    for name, version in report.packages.items():
        click.echo(f"{name:<18} {version or 'not installed'}")
