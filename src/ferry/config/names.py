"""Kafka names derived from free-text names.

A pipeline's name is free text in Flink CDC (``MySQL to Kafka Pipeline``, as in its quickstarts),
but it also names Kafka things: the consumer group and the dead-letter topic. :func:`kafka_name`
derives a legal Kafka topic name from it: a name that already is one is kept as it is (so a
pipeline keeps its group); any other gets its illegal characters replaced by ``-`` and a short
digest of the original, so that ``a b`` and ``a-b`` do not share a consumer group.
"""

from __future__ import annotations

import hashlib
import re

#: The characters of a Kafka topic name.
_ILLEGAL_RE = re.compile(r"[^A-Za-z0-9._-]+")
_LEGAL_RE = re.compile(r"[A-Za-z0-9._-]+")

#: Longest derived name. A topic name has at most 249 characters; a derived name leaves room for
#: what is put around it (``ferry-<name>-control-<worker>-__assignor-__leader``, ``<name>.dlq``).
MAX_DERIVED_LENGTH = 120
_DIGEST_LENGTH = 8


def is_kafka_name(name: str) -> bool:
    """Whether ``name`` is a legal Kafka topic name of at most :data:`MAX_DERIVED_LENGTH` characters."""
    return (
        0 < len(name) <= MAX_DERIVED_LENGTH
        and _LEGAL_RE.fullmatch(name) is not None
        and name not in (".", "..")
    )


def kafka_name(name: str) -> str:
    """A legal Kafka topic (and consumer group) name for ``name``; ``name`` itself when it is one.

    >>> kafka_name("shop")
    'shop'
    >>> kafka_name("MySQL to Kafka Pipeline")
    'MySQL-to-Kafka-Pipeline-f4a7baf1'
    """
    if is_kafka_name(name):
        return name
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=_DIGEST_LENGTH // 2).hexdigest()
    base = _ILLEGAL_RE.sub("-", name).strip("-.")
    base = base[: MAX_DERIVED_LENGTH - _DIGEST_LENGTH - 1].rstrip("-.")
    return f"{base}-{digest}" if base else f"ferry-{digest}"
