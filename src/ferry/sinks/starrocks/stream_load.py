"""A Stream Load client: one HTTP PUT of a JSON array per table and batch, under a label.

``PUT http://<fe-or-be>/api/<db>/<table>/_stream_load`` with Basic auth and the headers
``label`` (a load under a label that already succeeded is refused with ``Label Already Exists``:
a retried batch is not loaded twice), ``format: json``, ``strip_outer_array: true`` and ``columns``.
The answer is a JSON status: ``Status`` (``Success``, ``Publish Timeout``, ``Label Already Exists``,
``Fail``), ``Message``, ``NumberLoadedRows``, ``NumberFilteredRows`` and ``ErrorURL`` (the rejected
rows). A frontend answers with a redirect (307) to a backend; the body is sent again there. The
sink's ``sink.properties.*`` are further headers of every load (``max_filter_ratio``, ``timeout``).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from ferry.sinks.exceptions import SinkRowError, SinkTerminalError, SinkTransientError

#: Statuses of a load whose rows are (or already were) in the table.
LOADED = ("Success", "Publish Timeout", "Label Already Exists")
_REDIRECTS = 3


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def quote_column(name: str) -> str:
    """A column name in the ``columns`` header: backticks around it, doubled inside."""
    return "`" + name.replace("`", "``") + "`"


def stream_load(
    base_url: str,
    database: str,
    table: str,
    *,
    label: str,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    username: str,
    password: str,
    timeout: float,
    sink: str,
    properties: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Load ``rows`` under ``label``; the status JSON of a load that succeeded (or already had)."""
    path = f"/api/{urllib.parse.quote(database, safe='')}/{urllib.parse.quote(table, safe='')}/_stream_load"
    url = base_url.rstrip("/") + path
    body = json.dumps(list(rows), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    headers = {
        **(properties or {}),
        "Authorization": f"Basic {token}",
        "label": label,
        "format": "json",
        "strip_outer_array": "true",
        "columns": ", ".join(quote_column(c) for c in columns),
        "Content-Type": "application/json; charset=utf-8",
    }
    for _ in range(_REDIRECTS + 1):
        request = urllib.request.Request(url, data=body, headers=headers, method="PUT")
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                payload = response.read()
            break
        except urllib.error.HTTPError as e:
            location = e.headers.get("Location")
            if e.code in (307, 308) and location:
                url = urllib.parse.urljoin(url, location)
                continue
            text = e.read().decode("utf-8", "replace")[:500]
            error = SinkTransientError if e.code >= 500 or e.code == 429 else SinkTerminalError
            raise error(f"stream load {label}: HTTP {e.code}: {text}", sink=sink, table=table) from None
        except (urllib.error.URLError, OSError) as e:
            raise SinkTransientError(f"stream load {label}: {e}", sink=sink, table=table) from None
    else:
        raise SinkTerminalError(f"stream load {label}: too many redirects", sink=sink, table=table)
    try:
        status: dict[str, Any] = json.loads(payload)
    except ValueError:
        raise SinkTransientError(
            f"stream load {label}: the answer is not JSON: {payload[:200]!r}", sink=sink, table=table
        ) from None
    if status.get("Status") not in LOADED:
        filtered = status.get("NumberFilteredRows")
        rows_refused = isinstance(filtered, int) and filtered > 0  # rows refused for their data
        message = (
            f"stream load {label} failed: {status.get('Status')}: {status.get('Message')}"
            + (_error_log(status.get("ErrorURL"), timeout) if rows_refused else "")
            + f" (filtered rows: {filtered}, errors: {status.get('ErrorURL')})"
        )
        raise (SinkRowError if rows_refused else SinkTerminalError)(message, sink=sink, table=table)
    return status


def _error_log(url: object, timeout: float) -> str:
    """The start of the rows a load rejected and why (``ErrorURL``), best effort."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return ""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            text = response.read(2000).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError):
        return ""
    return ": " + " ".join(text.split())[:500]
