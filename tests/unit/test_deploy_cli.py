"""What an operator reads first: ``ferry --version``, the exit codes in ``--help``, the status
port's address on ``ferry run``."""

from __future__ import annotations

from click.testing import CliRunner

import ferry
from ferry.cli.main import EXIT_FAILED, EXIT_INVALID, EXIT_UNEXPECTED, main


def test_version_names_the_installed_distribution() -> None:
    for flag in ("--version", "-V"):
        result = CliRunner().invoke(main, [flag])
        assert result.exit_code == 0 and result.output == f"ferry {ferry.version()}\n"


def test_help_lists_every_exit_code() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = result.output.split("Exit codes:")[1]
    for code in (0, EXIT_FAILED, EXIT_INVALID, EXIT_UNEXPECTED):
        assert f"\n    {code}  " in listed, code
    assert "ferry check" in listed


def test_run_takes_the_status_host_from_an_option_or_the_environment() -> None:
    result = CliRunner().invoke(main, ["run", "--help"])
    assert "--status-host" in result.output and "FERRY_STATUS_HOST" in result.output
    params = {p.name: p for p in main.commands["run"].params}
    assert params["status_host"].envvar == "FERRY_STATUS_HOST"
    assert params["status_host"].default == "127.0.0.1"
