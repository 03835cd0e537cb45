"""Rendering of command results as text or JSON."""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson

from ferry.pipeline.state import StateStore


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def status_data(store: StateStore, names: list[str]) -> list[dict[str, Any]]:
    out = []
    for name in names:
        row = store.get_status(name)
        checkpoint = store.latest_checkpoint(name)
        history = store.schema_history(name)
        out.append(
            {
                "pipeline": name,
                "phase": row["phase"] if row else "UNKNOWN",
                "detail": row["detail"] if row else "no status recorded",
                "updated_ms": row["updated_ms"] if row else None,
                "metrics": row["metrics"] if row else {},
                "checkpoint": None
                if checkpoint is None
                else {
                    "id": checkpoint.id,
                    "created_ms": checkpoint.created_ms,
                    "offsets": {f"{t}[{p}]": o for (t, p), o in sorted(checkpoint.offsets.items())},
                },
                "schema_history": [
                    {
                        "source_table": h.source_table,
                        "sink_table": h.sink_table,
                        "change": h.change,
                        "outcome": h.outcome,
                        "reason": h.reason,
                        "position": h.position,
                        "at_ms": h.at_ms,
                    }
                    for h in history
                ],
            }
        )
    return out


def render_status(store: StateStore, names: list[str], output: str) -> str:
    data = status_data(store, names)
    if output == "json":
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
    if not data:
        return "no pipelines in this state store"
    lines: list[str] = []
    for p in data:
        m = p["metrics"]
        lines.append(
            f"pipeline {p['pipeline']}: {p['phase']} — {p['detail']} (updated {_when(p['updated_ms'])})"
        )
        lines.append(
            f"  records read {m.get('records_read', 0)}, throughput {m.get('throughput_eps', 0)} events/s, "
            f"bad records {m.get('bad_records', 0)}, checkpoints {m.get('checkpoints', 0)} "
            f"(last {_when(m.get('last_checkpoint_ms'))})"
        )
        if m.get("schema_change_wait_ms"):
            lines.append(f"  time spent in schema-change barriers: {m['schema_change_wait_ms']} ms")
        lines.append("  partitions (offset / lag):")
        offsets, lag = m.get("offsets", {}), m.get("lag", {})
        for topic, parts in offsets.items():
            for partition, offset in parts.items():
                lines.append(f"    {topic}[{partition}]  {offset} / {lag.get(topic, {}).get(partition, '?')}")
        workers = m.get("workers", {})
        if workers:
            lines.append("  workers (phase, partitions, records read):")
            for name, w in sorted(workers.items()):
                parts = ", ".join(f"{t}[{n}]" for t, ns in w.get("assigned", {}).items() for n in ns)
                lines.append(
                    f"    {name}  {w.get('phase', '?')}  {parts or 'none'}  {w.get('records_read', 0)}"
                    f" (updated {_when(w.get('updated_ms'))})"
                )
        lines.append("  rows written:")
        for table, count in sorted(m.get("rows_written", {}).items()):
            lines.append(f"    {table}  {count}")
        for table, count in sorted(m.get("columns_dropped", {}).items()):
            lines.append(f"  rows of {table} that lost columns the sink lacks: {count}")
        lines.append("  schema-change history:")
        for h in p["schema_history"]:
            lines.append(f"    {_when(h['at_ms'])}  {h['change']}  → {h['outcome']} ({h['reason']})")
        if not p["schema_history"]:
            lines.append("    (none)")
    return "\n".join(lines)
