"""A Stream Load client: one HTTP PUT of a JSON array per table and batch, under a label.

``PUT http://<fe-or-be>/api/<db>/<table>/_stream_load`` with Basic auth and the headers
``label`` (a load under a label that already succeeded is refused with ``Label Already Exists``:
a retried batch is not loaded twice), ``format: json``, ``strip_outer_array: true`` and ``columns``.
The answer is a JSON status: ``Status`` (``Success``, ``Publish Timeout``, ``Label Already Exists``,
``Fail``), ``Message``, ``NumberLoadedRows``, ``NumberFilteredRows`` and ``ErrorURL`` (the rejected
rows). A frontend answers with a redirect (307) to a backend on another host; the body and the
credentials are sent again there. The
sink's ``sink.properties.*`` are further headers of every load (``max_filter_ratio``, ``timeout``).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ferry.sinks.base.exceptions import SinkRowError, SinkTerminalError, SinkTransientError

#: Statuses of a load whose rows are (or already were) in the table.
LOADED = ("Success", "Publish Timeout", "Label Already Exists")
_REDIRECTS = 3


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
    body = json.dumps(list(rows), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text_headers = {
        **(properties or {}),
        # a frontend refuses a load without it ("There is no 100-continue header")
        "Expect": "100-continue",
        "label": label,
        "format": "json",
        "strip_outer_array": "true",
        "columns": ", ".join(quote_column(c) for c in columns),
        "Content-Type": "application/json; charset=utf-8",
    }
    # header values go out in ISO-8859-1, as HTTP/1.1 and a frontend read them (httpx's own default
    # is ASCII, which would refuse a column named in Latin-1 letters)
    headers = {key.encode("latin-1"): value.encode("latin-1") for key, value in text_headers.items()}
    auth = httpx.BasicAuth(username, password)
    try:
        with httpx.Client(timeout=timeout) as client:
            request = client.build_request("PUT", base_url.rstrip("/") + path, headers=headers, content=body)
            for _ in range(_REDIRECTS + 1):
                # Redirects are followed here, not by httpx: on a redirect to another origin httpx
                # drops the Authorization header (as RFC 9110 asks of a client), and a frontend's
                # redirect goes to a backend on another host and port, which needs the credentials
                # as much as the frontend did. So each hop is sent with the same Basic auth, headers
                # and body, to the backend the frontend named.
                response = client.send(request, auth=auth)
                location = response.headers.get("Location")
                if response.status_code not in (307, 308) or not location:
                    break
                target = request.url.join(location)
                request = client.build_request("PUT", target, headers=headers, content=body)
            else:
                raise SinkTerminalError(f"stream load {label}: too many redirects", sink=sink, table=table)
    except httpx.HTTPError as e:
        raise SinkTransientError(f"stream load {label}: {e!r}", sink=sink, table=table) from None
    if response.is_error:
        code = response.status_code
        text = response.text[:500]
        error = SinkTransientError if code >= 500 or code == 429 else SinkTerminalError
        raise error(f"stream load {label}: HTTP {code}: {text}", sink=sink, table=table)
    payload = response.content
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
        response = httpx.get(url, timeout=timeout)
    except httpx.HTTPError:
        return ""
    if response.is_error:
        return ""
    text = response.text[:2000]
    return ": " + " ".join(text.split())[:500]
