"""One table from expected errors to ``Error: …`` on stderr and an exit code.

Unknown exceptions keep their traceback (bugs stay visible); ``--json`` runs
also get the error as a JSON document on stdout so scripts can read it.
"""

from __future__ import annotations

import json
import sys

import click

from gemmaserve.errors import GemmaserveError
from gemmaserve.result_model import ActionResult

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: The reader of our output left early (``gemmaserve plan | head -1``): 128 + SIGPIPE (13), the status the
#: shell reports for ``git log | head -1``, ``cat`` or ``seq`` in the same place. Not 0: the output was not
#: all delivered, and a script under ``set -o pipefail`` should see what it sees from those tools.
EXIT_OUTPUT_CLOSED = 141


def exit_code_for(result: ActionResult) -> int:
    """A command's exit status from its result: 130 for a run stopped part way, 1 when not ``ok``, else 0."""
    if result.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if result.ok else EXIT_FAILED


def run_with_error_mapping(app: click.Group, argv: list[str] | None, *, debug: bool) -> int:
    """Run ``app`` with every output redacted (:mod:`gemmaserve.cli.redaction`); return the process exit code."""
    from gemmaserve.cli.redaction import OutputClosed, redacted_output

    try:
        with redacted_output():
            return _run(app, argv, debug=debug)
    except OutputClosed:
        return EXIT_OUTPUT_CLOSED


def _run(app: click.Group, argv: list[str] | None, *, debug: bool) -> int:
    want_json = "--json" in (argv if argv is not None else sys.argv[1:])
    try:
        result = app.main(args=argv, prog_name="gemmaserve", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return EXIT_INTERRUPTED
    except GemmaserveError as exc:
        if debug:
            raise
        report_error(exc, as_json=want_json)
        return exc.exit_code
    return result if isinstance(result, int) else EXIT_OK


def report_error(exc: GemmaserveError, *, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(exc.to_dict(), indent=2, default=str))
    click.secho(f"Error: {exc.message}", err=True, fg="red")
    if exc.hint:
        click.echo(f"Hint: {exc.hint}", err=True)
