"""``--log-format json``: one JSON object a line, with the schema-change line's fields."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from ferry.logs import formatter, kafka_logger


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


def test_librdkafka_notices_and_information_are_debug_its_warnings_and_errors_keep_their_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # confluent-kafka calls its logger's log(level, "%s [%s] %s", facility, client, text), the
    # syslog levels mapped: NOTICE and INFO to logging.INFO, WARNING, ERR to their own
    client_log = kafka_logger("ferry.test.librdkafka")
    with caplog.at_level(logging.DEBUG, logger="ferry.test.librdkafka"):
        for level in (logging.INFO, logging.WARNING, logging.ERROR):
            client_log.log(level, "%s [%s] %s", "FAC", "rdkafka#consumer-1", logging.getLevelName(level))
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, "FAC [rdkafka#consumer-1] INFO"),
        (logging.WARNING, "FAC [rdkafka#consumer-1] WARNING"),
        (logging.ERROR, "FAC [rdkafka#consumer-1] ERROR"),
    ]
