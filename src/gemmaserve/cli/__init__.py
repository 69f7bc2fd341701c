"""The ``gemmaserve`` command line: argument parsing and rendering only.

Each noun lives in its own module (``gemmaserve.cli.<noun>``) exposing a click
object named ``cli``; they are imported only when their command runs, so
``gemmaserve --help`` stays fast. Errors are mapped to exit codes here, once.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from gemmaserve import __version__

# name -> (module, one-line help). The help text lives here so that listing the
# commands does not import every front end and its library.
COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("gemmaserve.cli.plan", "Which model, encoding and GPU fit, with KV pool, host RAM and cost."),
    "doctor": ("gemmaserve.cli.doctor", "Check this GPU host and a target interpreter, cheapest failure first."),
    "turing": ("gemmaserve.cli.turing", "The Turing (T4) shared-memory clamp: status, apply, verify, revert, smem."),
    "serve": ("gemmaserve.cli.serve", "Run vLLM on this host behind an interlock: start, status, stop, logs."),
    "sagemaker": ("gemmaserve.cli.sagemaker", "SageMaker endpoints that cannot leak money, and the derived T4 image."),
    "bench": ("gemmaserve.cli.bench", "Measure endpoints: decode rate, latency, throughput, quality, cost."),
    "checkpoint": ("gemmaserve.cli.checkpoint", "Inspect, grid-check, repack and validate Gemma 4 checkpoints."),
    "mcp": ("gemmaserve.cli.mcp", "Run the MCP server on stdio, for agents."),
    "env": ("gemmaserve.cli.env", "Print versions of gemmaserve and its dependencies, for bug reports."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command: click.Command = module.cli
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx) if name in COMMANDS]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="gemmaserve")
def app() -> None:
    """Serve Gemma 4 with vLLM on the cheapest NVIDIA GPU that holds it, and measure it honestly.

    Start with `gemmaserve plan`: it runs offline on the built-in catalog.
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: run the CLI and map expected errors to exit codes."""
    from gemmaserve.cli import redaction
    from gemmaserve.cli.errors import run_with_error_mapping

    redaction.install()
    code = run_with_error_mapping(app, argv, debug=os.environ.get("GEMMASERVE_DEBUG") == "1")
    sys.exit(code)
