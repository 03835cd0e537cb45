"""Rendering of command results as text or JSON: a pipeline's status, and the control plane's
pipeline and savepoint resources (as the API answers them)."""

from __future__ import annotations

import datetime as dt
import io
import shutil
import socket
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ferry.pipeline.catch_up import eta_seconds, format_eta
from ferry.pipeline.phase import Phase
from ferry.state import StateStore


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


#: A worker on another host whose status is older than this is taken for gone (a running worker
#: writes its status every second, and at least before and after each wait of a retry).
STALE_AFTER_MS = 5 * 60 * 1000
#: The phases in which a worker is expected to write its status again.
_LIVE_PHASES = (Phase.PENDING, Phase.RUNNING, Phase.STOPPING)


def worker_alive(worker: str, updated_ms: int | None, now: int) -> bool:
    """Whether a worker (``host:pid:random``) that last said it runs may still run: on this host,
    whether its process is there; elsewhere, whether its status is recent."""
    host, _, rest = worker.partition(":")
    pid = rest.partition(":")[0]
    if host == socket.gethostname() and pid.isdigit():
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
                return stat.read().rpartition(")")[2].split()[0] != "Z"  # a zombie ended
        except FileNotFoundError:
            return False
        except OSError:
            pass  # no /proc: the status's age decides
    return updated_ms is not None and now - updated_ms < STALE_AFTER_MS


def live_phase(row: Mapping[str, Any], now: int) -> tuple[str, str]:
    """The phase and detail of a status row as they are now: a pipeline whose status says it runs
    but none of whose workers is there any more has FAILED (killed, or ended without a word)."""
    phase, detail = str(row["phase"]), str(row["detail"])
    if phase not in _LIVE_PHASES:
        return phase, detail
    metrics = row.get("metrics") or {}
    workers = {w: s for w, s in (metrics.get("workers") or {}).items() if s.get("phase") in _LIVE_PHASES}
    if not workers and metrics.get("worker"):
        workers = {metrics["worker"]: {"updated_ms": row.get("updated_ms")}}
    if not workers:
        return phase, detail
    gone = sorted(w for w, s in workers.items() if not worker_alive(w, s.get("updated_ms"), now))
    if not gone:
        return phase, detail
    said = f"it last said {phase}: {detail} (at {_when(row.get('updated_ms'))})"
    if len(gone) == len(workers):
        what = "its worker" if len(gone) == 1 else "its workers"
        return str(Phase.FAILED), f"{what} {', '.join(gone)} ended without a final status (killed?); {said}"
    return phase, f"{detail}; worker {', '.join(gone)} ended without a final status (killed?)"


def status_data(store: StateStore, names: list[str]) -> list[dict[str, Any]]:
    out = []
    now = int(time.time() * 1000)
    for name in names:
        row = store.get_status(name)
        checkpoint = store.latest_checkpoint(name)
        history = store.schema_history(name)
        phase, detail = live_phase(row, now) if row else ("UNKNOWN", "no status recorded")
        out.append(
            {
                "pipeline": name,
                "phase": phase,
                "detail": detail,
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
                        "barrier_ms": h.barrier_ms,
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
            f"bad records {m.get('bad_records', 0)}, tombstones {m.get('tombstones', 0)}, "
            f"checkpoints {m.get('checkpoints', 0)} (last {_when(m.get('last_checkpoint_ms'))})"
        )
        behind = m.get("records_behind")
        if behind:
            lines.append(
                f"  catching up: {behind} records behind at {_rate(m.get('rate_eps'))}, "
                f"ETA {format_eta(m.get('eta_s'))}"
            )
        for line in m.get("unmatched_rules") or ():
            lines.append(f"  warning: {line}")
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
            barrier = "" if h["barrier_ms"] is None else f"; barrier {h['barrier_ms']} ms"
            lines.append(f"    {_when(h['at_ms'])}  {h['change']}  → {h['outcome']} ({h['reason']}){barrier}")
        if not p["schema_history"]:
            lines.append("    (none)")
    return "\n".join(lines)


def _rate(rate: Any) -> str:
    return "–" if rate is None else f"{float(rate):,.1f} records/s"


def status_table(store: StateStore, names: list[str], at_ms: int) -> Table:
    """The live table of ``ferry status --watch``: per pipeline its phase, records read, recent
    rate, records behind and the ETA of the catch-up (records behind ÷ recent rate), rows
    written, and what it does."""
    table = Table(title=f"ferry status at {_when(at_ms)}", expand=False)
    for header, justify in (
        ("pipeline", "left"),
        ("phase", "left"),
        ("records read", "right"),
        ("rate", "right"),
        ("behind", "right"),
        ("ETA", "right"),
        ("rows written", "right"),
        ("updated", "left"),
        ("detail", "left"),
    ):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    for p in status_data(store, names):
        m = p["metrics"]
        behind = m.get("records_behind")
        if behind is None:
            behind = sum(int(n) for parts in (m.get("lag") or {}).values() for n in parts.values())
        rate = m.get("rate_eps")
        table.add_row(
            p["pipeline"],
            p["phase"],
            f"{m.get('records_read', 0):,}",
            _rate(rate),
            f"{behind:,}",
            format_eta(eta_seconds(int(behind), rate)) if p["phase"] == Phase.RUNNING else "–",
            f"{sum((m.get('rows_written') or {}).values()):,}",
            _when(p["updated_ms"]),
            p["detail"],
        )
    if not names:
        table.caption = "no pipelines in this state store"
    return table


def _progress_lines(progress: Mapping[str, Any]) -> list[str]:
    """A bounded replay's progress: in all, then per partition; once done, what it read and wrote."""
    state = progress.get("state", "READING")
    done_of = f"{progress['recordsDone']} of {progress['recordsTotal']} records ({progress['percent']}%)"
    if state == "READING":
        head = (
            f"{done_of}, {_rate(progress.get('ratePerSecond'))}, ETA {format_eta(progress.get('etaSeconds'))}"
        )
    else:
        head = (
            f"{state}: {done_of}; read {progress.get('recordsRead', 0)} records, "
            f"wrote {progress.get('rowsWritten', 0)} rows"
        )
    lines = [f"  progress: {head}"]
    for part in progress.get("partitions") or ():
        lines.append(
            f"    {part['topic']}[{part['partition']}]: {part['recordsDone']} of {part['recordsTotal']} "
            f"({part['percent']}%)"
        )
    return lines


def render_pipeline(resource: Mapping[str, Any]) -> str:
    metadata, spec, status = resource["metadata"], resource["spec"], resource.get("status") or {}
    lines = [
        f"pipeline {metadata['name']} (environment {metadata.get('environment', '?')})",
        f"  phase:    {status.get('phase', '?')}",
        f"  detail:   {status.get('detail', '')}",
    ]
    for field_name in ("labels", "annotations"):
        pairs = metadata.get(field_name) or {}
        if pairs:
            lines.append(f"  {field_name}: " + ", ".join(f"{k}={v}" for k, v in sorted(pairs.items())))
    traits = status.get("traits") or {}
    lines.append(
        f"  bounded: {'yes' if traits.get('isBounded') else 'no'}; "
        f"append-only: {'yes' if traits.get('isAppendOnly') else 'no'}"
    )
    if status.get("deadline"):
        lines.append(f"  deadline: {status['deadline']}")
    reference = (spec.get("properties") or {}).get("sql.tables.initial-offset-from")
    if reference:
        lines.append(f"  inherits offsets from: {reference}")
    inherited = (status.get("traits") or {}).get("inheritedOffsetTopics") or []
    lines.append(f"  inherited topics: {', '.join(inherited) if inherited else 'none'}")
    latest = status.get("latestOffsets") or {}
    if latest:
        lines.append("  latest offsets:")
        lines += [f"    {topic}: {offsets}" for topic, offsets in sorted(latest.items())]
    progress = status.get("progress")
    if progress:
        lines += _progress_lines(progress)
    if status.get("lostOffsets"):
        lines.append(f"  lost to retention: {status['lostOffsets']}")
    metrics = status.get("metrics") or {}
    if metrics:
        written = sum((metrics.get("rows_written") or {}).values())
        lines.append(
            f"  records read: {metrics.get('records_read') or 0}, rows written: {written}, "
            f"bad records: {metrics.get('bad_records') or 0}"
        )
        if metrics.get("records_behind") and status.get("phase") == Phase.RUNNING:
            lines.append(
                f"  catching up: {metrics['records_behind']} records behind at "
                f"{_rate(metrics.get('rate_eps'))}, ETA {format_eta(metrics.get('eta_s'))}"
            )
    replay_line = _replay_line(spec)
    if replay_line:
        lines.append(f"  replay: {replay_line}")
    lines.append(
        f"  upgrade mode: {spec.get('upgradeMode', 'savepoint')}; "
        f"stopped: {'yes' if spec.get('stopped') else 'no'}"
    )
    lines.append(f"  created {metadata.get('creationTimestamp')}, updated {metadata.get('updateTimestamp')}")
    return "\n".join(lines)


def _replay_line(spec: Mapping[str, Any]) -> str:
    start = spec.get("startFrom")
    if not start:
        return ""
    if start.get("timestampMillis") is not None:
        parts = [f"from {_iso(start['timestampMillis'])}"]
    elif start.get("savepoint"):
        parts = [f"from savepoint {start['savepoint']}"]
    else:
        parts = [f"from offsets {start.get('offsets')}"]
    end = spec.get("bounded")
    if end:
        until = {
            "timestamp": lambda: _iso(end.get("timestampMillis")),
            "specific-offsets": lambda: str(end.get("offsets")),
        }
        parts.append(f"until {end['mode']}" + (f" {until[end['mode']]()}" if end["mode"] in until else ""))
    if spec.get("rebuildTables"):
        parts.append(f"rebuilding {', '.join(spec['rebuildTables'])}")
    return ", ".join(parts)


def _iso(ms: Any) -> str:
    if not isinstance(ms, int):
        return str(ms)
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


#: A column of a listing: its header and its least width in plain text (a phase or state column
#: keeps one width whatever the rows hold, as the listings always had).
Heading = tuple[str, int]


def table_text(
    columns: Sequence[Heading], rows: Iterable[Sequence[object]], *, terminal: bool | None = None
) -> str:
    """A listing as text. On a terminal (``terminal`` None: whether stdout is one), rich's table:
    bold headers under a rule, cells folded to fit the terminal's width. Otherwise plain text for
    grep, awk and files: columns two spaces apart, no colour, no rule, no line wrapped or cut."""
    if terminal is None:
        terminal = sys.stdout.isatty()
    table = Table(
        box=box.SIMPLE_HEAD if terminal else None,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        header_style="bold" if terminal else "",
    )
    for header, min_width in columns:
        if terminal:  # a cell too wide for the terminal folds onto more lines, never cut
            table.add_column(header, overflow="fold")
        else:
            table.add_column(header, min_width=min_width, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))  # Text: a cell's brackets are not markup
    out = io.StringIO()
    console = Console(
        file=out,
        force_terminal=terminal,
        no_color=not terminal or None,
        width=shutil.get_terminal_size().columns if terminal else 1 << 20,
        highlight=False,
    )
    console.print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def render_pipelines(
    items: list[Mapping[str, Any]], environment: str, *, terminal: bool | None = None
) -> str:
    if not items:
        return f"no pipelines in environment {environment}"
    rows = []
    for item in items:
        status = item.get("status") or {}
        rows.append([item["metadata"]["name"], status.get("phase", "?"), status.get("detail", "")])
    return table_text([("NAME", 4), ("PHASE", 8), ("DETAIL", 0)], rows, terminal=terminal)


def render_savepoint(resource: Mapping[str, Any]) -> str:
    metadata, spec, status = resource["metadata"], resource["spec"], resource["status"]
    lines = [
        f"savepoint {metadata.get('name', metadata['uid'])} ({metadata['uid']}) of pipeline "
        f"{metadata['pipeline']}",
        f"  source: {spec['source']}; pinned: {'yes' if spec['pinned'] else 'no'}",
        f"  state:  {status['state']}" + (f" ({status['reason']})" if status.get("reason") else ""),
        f"  requested {metadata.get('creationTimestamp')}, completed {status.get('completionTimestamp')}",
    ]
    for topic, offsets in sorted((status.get("offsets") or {}).items()):
        lines.append(f"  {topic}: {offsets}")
    return "\n".join(lines)


def render_savepoints(
    items: list[Mapping[str, Any]], pipeline_name: str, *, terminal: bool | None = None
) -> str:
    if not items:
        return f"no savepoints of pipeline {pipeline_name}"
    columns = [("NAME", 4), ("UID", 36), ("SOURCE", 8), ("STATE", 9), ("PINNED", 6), ("REQUESTED", 0)]
    if any(item["status"].get("reason") for item in items):
        columns.append(("", 0))  # why a savepoint failed, unheaded
    rows = []
    for item in items:
        status, spec, metadata = item["status"], item["spec"], item["metadata"]
        row = [
            metadata.get("name", ""),
            metadata["uid"],
            spec["source"],
            status["state"],
            "yes" if spec["pinned"] else "no",
            str(metadata.get("creationTimestamp")),
        ]
        rows.append(row + [status.get("reason") or ""] * (len(columns) - len(row)))
    return table_text(columns, rows, terminal=terminal)
