"""One log format for every process of ferry: ``text`` for a terminal, ``json`` (one object a line,
for a log collector) through python-json-logger. uvicorn's and librdkafka's records reach the same
root handler: ferry's Kafka clients are given a Python logger (:func:`kafka_logger`,
confluent-kafka's ``logger`` setting) instead of writing to stderr themselves, librdkafka's notices
and informational lines at DEBUG (ferry's own lines say what a pipeline reads, writes and did).

Secrets stay out of the log: :class:`SecretMask`, on the handler, masks in every record (its
message, its arguments, its traceback and its extra fields) the secret values of the job being run
(:func:`register_secrets`: every ``SecretStr`` and every value of a secret-bearing key, such as
``sasl.password`` or ``sasl.jaas.config``), the passwords of URLs with credentials, and the value
of any ``password=...``, ``"token": "..."`` or ``sasl.jaas.config`` setting written in the text.
:func:`mask_secrets` does the same to an error message shown to a user.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from ferry.control.secrets import MASK, is_secret_key, mask_url_credentials, secret_parts

LogFormat = Literal["text", "json"]
FORMATS: tuple[LogFormat, ...] = ("text", "json")

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: JSON keys: time (ISO 8601, UTC), level, logger, message, and whatever ``extra`` a call passed.
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s"

#: The loggers of libraries whose records are ferry's too (their own handlers are dropped).
LIBRARY_LOGGERS = ("uvicorn", "uvicorn.access", "uvicorn.error", "librdkafka")

#: ``key=value``, ``key: value`` and ``"key": "value"`` of a secret-bearing key, in free text.
#: The key ends with the secret word (``sasl.password``, ``access-key``): ``tokens: 3`` and
#: ``token-sha256: ...`` (a digest) are no secrets.
_SECRET_SETTING = re.compile(
    r"""(?P<key>["']?[\w.-]*?(?:password|passwd|passphrase|secret|token|credentials?|user[-_.]info|"""
    r"""authorization|connection[-_.]?string|(?:access|private|api|account|keystore)[-_.]?key|"""
    r"""key[-_.]pem)["']?\s*[:=]\s*)"""
    r"""(?P<quote>["']?)(?P<value>[^"'\s,;}&]+)""",
    re.IGNORECASE,
)
#: ``sasl.jaas.config``'s value, to the end of the setting (it holds ``password="..."``).
_JAAS = re.compile(r"""(?P<key>sasl\.jaas\.config["']?\s*[:=]\s*)(?P<value>[^\n]*?;)""", re.IGNORECASE)
#: The password inside a ``sasl.jaas.config`` value.
_JAAS_PASSWORD = re.compile(r"""password\s*=\s*["']?(?P<value>[^"'\s;]+)""")
#: Secrets shorter than this are not looked for in text (a one-letter "password" would mask
#: every occurrence of the letter).
_SHORTEST = 4

_known: set[str] = set()
_lock = threading.Lock()


def register_secrets(values: Iterable[str]) -> None:
    """Mask these values wherever they appear in a log record or a message to a user."""
    with _lock:
        _known.update(v for v in values if len(v) >= _SHORTEST)


def secrets_of(config: Any) -> list[str]:
    """The secret values of a configuration: every ``SecretStr``, and every string of a
    secret-bearing key (``password``, ``sasl.jaas.config``, ``...token...``) in its models and maps."""
    from pydantic import BaseModel, SecretStr  # noqa: PLC0415 - a configuration is one of its models

    found: list[str] = []

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, SecretStr):
            found.append(node.get_secret_value())
        elif isinstance(node, BaseModel):
            for name, info in type(node).model_fields.items():
                walk(getattr(node, name, None), info.alias or name)
        elif isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, list | tuple):
            for item in node:
                walk(item, key)
        elif isinstance(node, str):
            parts = secret_parts(key, node)
            found.extend(parts)
            if parts and is_secret_key(key):
                found.extend(m["value"] for m in _JAAS_PASSWORD.finditer(node))

    walk(config)
    return found


def mask_secrets(text: str) -> str:
    """``text`` with every registered secret, URL password and secret setting masked."""
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    if "://" in text:
        text = mask_url_credentials(text)
    text = _JAAS.sub(lambda m: f"{m['key']}{MASK};", text)
    return _SECRET_SETTING.sub(
        lambda m: m[0] if m["value"].startswith(("${", MASK)) else f"{m['key']}{m['quote']}{MASK}", text
    )


#: A LogRecord's own attributes: the others are a call's ``extra`` fields.
_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


class SecretMask(logging.Filter):
    """Masks secrets in every record that passes (see the module documentation)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a call whose arguments do not fit its format: logging reports it
            return True
        masked = mask_secrets(message)
        if masked != message or record.args:
            record.msg, record.args = masked, None
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = mask_secrets(text), None
        elif record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        for key, value in list(record.__dict__.items()):
            if key not in _RECORD_FIELDS and isinstance(value, str):
                setattr(record, key, mask_secrets(value))
        return True


def formatter(log_format: LogFormat) -> logging.Formatter:
    if log_format == "json":
        from pythonjsonlogger.json import JsonFormatter  # noqa: PLC0415

        return JsonFormatter(
            JSON_FIELDS,
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            timestamp=False,
            datefmt="%Y-%m-%dT%H:%M:%S%z",
        )
    return logging.Formatter(TEXT)


def configure(level: str, log_format: LogFormat = "text") -> None:
    """Send every record at ``level`` or above to stderr in ``log_format``, secrets masked. As with
    :func:`logging.basicConfig`, a root logger that already has handlers (a host application's,
    a test runner's) keeps them, and they mask secrets too."""
    root = logging.getLogger()
    root.setLevel(level.upper())
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter(log_format))
        root.addHandler(handler)
    for each in root.handlers:
        if not any(isinstance(f, SecretMask) for f in each.filters):
            each.addFilter(SecretMask())
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True


class KafkaClientLog:
    """What a confluent-kafka client logs through (its ``logger`` setting, which calls ``log``):
    librdkafka's warnings and errors at their level, its notices and informational lines
    (connections, group joins, in librdkafka's words) at DEBUG."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def log(self, level: int, msg: str, *args: object) -> None:
        self.logger.log(logging.DEBUG if level < logging.WARNING else level, msg, *args)


def kafka_logger(name: str = "librdkafka") -> KafkaClientLog:
    """The logger a confluent-kafka client writes librdkafka's messages to (its ``logger``
    setting), so that they take ferry's format and level instead of going to stderr as they are."""
    return KafkaClientLog(logging.getLogger(name))
