"""What an operator reads first: ``ferry --version``, the exit codes in ``--help``, the status
port's address on ``ferry run``; ``--version`` and ``--help`` load nothing they do not show, and a
command whose extra is missing says which."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

import ferry
from ferry.cli.main import EXIT_FAILED, EXIT_INVALID, EXIT_UNEXPECTED, LAZY_COMMANDS, main


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


#: Prints the modules loaded after ``ferry <argv[1]>`` ran (its exit caught).
LOADED_AFTER = """
import sys
from ferry.cli.main import main
try:
    main([sys.argv[1]])
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)))
"""

#: What neither ``ferry --version`` nor ``ferry --help`` needs: the pipeline, sinks, Kafka clients,
#: the job model and its libraries.
HEAVY = (
    "confluent_kafka",
    "pyarrow",
    "pyiceberg",
    "sqlalchemy",
    "sqlglot",
    "pydantic",
    "ruamel.yaml",
    "ferry.pipeline",
    "ferry.sinks",
    "ferry.worker",
    "ferry.config",
)


def test_version_and_help_import_no_pipeline_sink_or_kafka_client() -> None:
    for flag in ("--version", "--help"):
        result = subprocess.run(
            [sys.executable, "-c", LOADED_AFTER, flag],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        loaded = set(result.stdout.split())
        assert "ferry.cli.main" in loaded
        assert sorted(m for m in HEAVY if m in loaded) == [], flag


def test_help_lists_each_command_with_its_own_short_help() -> None:
    ctx = click.Context(main)
    for name, (_, short_help) in LAZY_COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None and command.get_short_help_str(10_000) == short_help, name
    assert sorted(main.list_commands(ctx)) == sorted(
        ["check", "pipeline", "replay", "run", "savepoint", "serve", "sinks", "status", "validate", "worker"]
    )


#: ``ferry serve`` where the module argv[1] cannot be imported (as without the server extra).
WITHOUT_MODULE = """
import sys
sys.modules[sys.argv[1]] = None  # an import of it raises ModuleNotFoundError
from ferry.cli.main import main
main(["serve", "--config", sys.argv[2]])
"""


def test_serve_without_the_server_extra_names_it_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text(f"state.url: sqlite:///{tmp_path}/state.db\n")
    for module in ("uvicorn", "fastapi"):
        result = subprocess.run(
            [sys.executable, "-c", WITHOUT_MODULE, module, str(config)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert result.returncode == EXIT_INVALID, result.stderr
        assert result.stderr == (
            f"error: ferry serve needs the 'server' extra ({module} is missing): pip install 'ferry-cdc[server]'\n"
        )
