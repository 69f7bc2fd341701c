"""Every number every command takes, at its extremes: a one-line error (exit 2) or a result, never a traceback.

``inf``, ``nan`` and huge values reach date arithmetic (an expiry tag), ``timedelta`` (how far back to read
logs), sleeps and sizes; each command runs as a user runs it, with the parameters it needs to get going
(:data:`tests.integration.test_redaction.CLI_REQUIRED`), against moto's server.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from gemmaserve.cli import app
from gemmaserve.cli.errors import run_with_error_mapping
from tests.integration.test_redaction import _invocation, command_parameters, in_tmp_path  # noqa: F401 - a fixture
from tests.support.sagemaker.fixtures import aws_env, moto_factory, moto_server_url  # noqa: F401 - fixtures


def _numeric_options() -> list[tuple[str, str]]:
    numbers = (click.types.FloatParamType, click.types.IntParamType)
    return command_parameters(lambda p: isinstance(p, click.Option) and not p.is_flag and isinstance(p.type, numbers))


@pytest.mark.usefixtures("aws_env", "in_tmp_path")
@pytest.mark.parametrize(("path", "param_name"), _numeric_options())
def test_extreme_numbers_are_refused_in_one_line_or_used(
    path: str, param_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for value in ("inf", "-inf", "nan", "1e300", "-1e300"):
        args = _invocation(path, param_name, value, tmp_path)
        code = run_with_error_mapping(app, [*args, "--json"], debug=False)
        _, err = capsys.readouterr()
        assert "Traceback" not in err, (args, err)
        if value in ("inf", "-inf", "nan"):
            assert code == 2, (args, code, err)
