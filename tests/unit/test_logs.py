"""``--log-format json``: one JSON object a line, with the schema-change line's fields."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from ferry.logs import formatter


def test_json_lines_carry_time_level_logger_message_and_extras() -> None:
    record = logging.LogRecord(
        "ferry.pipeline.schema_operator", logging.INFO, __file__, 1, "applied %s", ("add.column",), None
    )
    record.table = "ods.orders"
    line = json.loads(formatter("json").format(record))
    assert line["level"] == "INFO" and line["logger"] == "ferry.pipeline.schema_operator"
    assert line["message"] == "applied add.column" and line["table"] == "ods.orders"
    assert line["time"][:2] == "20" and "T" in line["time"]


def test_the_command_logs_json_when_asked() -> None:
    code = (
        "import logging, sys; from ferry.cli.main import main; "
        "main(['--log-format', 'json', 'sinks'], standalone_mode=False); "
        "logging.getLogger('ferry.test').warning('a %s line', 'json')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    [line] = [json.loads(x) for x in result.stderr.splitlines() if x.startswith("{")]
    assert line == {
        "time": line["time"],
        "level": "WARNING",
        "logger": "ferry.test",
        "message": "a json line",
    }
