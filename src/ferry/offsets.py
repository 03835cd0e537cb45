"""Offsets: per Kafka partition, the next offset to read; and the one form they are written in.

Checkpoints, savepoints, the status row, a pipeline's start and end offsets and the table formats'
snapshot properties all write offsets as ``{"topic": {"partition": next_offset}}`` (JSON has no
tuple keys): :func:`encode_offsets` and :func:`decode_offsets` are the only conversion.
"""

from __future__ import annotations

from collections.abc import Mapping

#: (topic, partition)
Partition = tuple[str, int]
#: (topic, partition) → the next offset to read
Offsets = Mapping[Partition, int]


def encode_offsets(offsets: Offsets) -> dict[str, dict[str, int]]:
    """``{"topic": {"partition": next_offset}}``, topics and partitions in order."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def decode_offsets(data: Mapping[str, Mapping[str, int]]) -> dict[Partition, int]:
    """The offsets :func:`encode_offsets` wrote."""
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


def describe_offsets(offsets: Offsets) -> str:
    """Offsets for a log line: ``topic[0]@12, [1]@40; other[0]@3`` (``none`` when empty)."""
    return (
        "; ".join(
            f"{topic}" + ", ".join(f"[{p}]@{o}" for p, o in sorted((int(p), o) for p, o in parts.items()))
            for topic, parts in encode_offsets(offsets).items()
        )
        or "none"
    )
