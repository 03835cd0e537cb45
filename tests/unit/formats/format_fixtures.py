"""Loading the shared CDC fixtures (``/work/shared/fixtures``) as Kafka records.

Files hold one JSON document per line, or one pretty-printed document; some start with an ASF
licence ``/* */`` comment, and some hold several events as ``{"expected_snapshot": ...,
"expected_binlog": ...}``. Each event becomes one record value (compact JSON, keys in file order).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
from tests.shared import SHARED

from ferry.connectors.record import Record
from ferry.model.events import BadRecord, DataChange, Event, SchemaHint, SchemaObserved

FIXTURES = Path(os.environ.get("FERRY_FIXTURES", str(SHARED / "fixtures")))
_LICENCE = re.compile(r"\A\s*/\*.*?\*/", re.S)


def documents(path: str) -> list[Any]:
    text = _LICENCE.sub("", (FIXTURES / path).read_text(encoding="utf-8")).strip()
    try:
        found = [orjson.loads(text)]
    except orjson.JSONDecodeError:
        found = [orjson.loads(line) for line in text.splitlines() if line.strip()]
    out: list[Any] = []
    for document in found:
        if isinstance(document, dict) and document and all(k.startswith("expected_") for k in document):
            out += document.values()
        else:
            out.append(document)
    return out


def records(path: str, topic: str = "topic", partition: int = 0) -> list[Record]:
    return [
        Record(topic, partition, offset, value=orjson.dumps(document))
        for offset, document in enumerate(documents(path))
    ]


def key_value_records(path: str, topic: str = "topic") -> list[Record]:
    """Files that alternate a key line and a value line."""
    docs = documents(path)
    return [
        Record(topic, 0, i // 2, key=orjson.dumps(docs[i]), value=orjson.dumps(docs[i + 1]))
        for i in range(0, len(docs), 2)
    ]


def of_type(events: Iterable[Event], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def summary(events: list[Event]) -> dict[str, int]:
    """Decoded records by outcome: the number of distinct offsets that gave each kind of event
    (``insert``, ``update``, ... for data changes, ``hint``, ``bad``), comparable to the record
    counts in the fixtures' README (a Canal message with several rows counts once)."""
    offsets: dict[str, set[int]] = {}
    for e in events:
        if isinstance(e, DataChange):
            label = e.op.value
        elif isinstance(e, SchemaHint):
            label = "hint"
        elif isinstance(e, BadRecord):
            label = "bad"
        elif isinstance(e, SchemaObserved):
            continue
        else:
            label = getattr(e, "tag", type(e).__name__)
        position = getattr(e, "position", None)
        offsets.setdefault(label, set()).add(position.offset if position is not None else -1)
    return {label: len(found) for label, found in sorted(offsets.items())}


def rows_by_op(events: list[Event]) -> dict[str, int]:
    return dict(sorted(Counter(e.op.value for e in events if isinstance(e, DataChange)).items()))
