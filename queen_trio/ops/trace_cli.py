"""`queen-trio trace NAME`: a trace's timeline in a terminal, to debug a flow end to end."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, TextIO

from ..exits import Exit

PAGE = 500


def fetch_trace(base_url: str, name: str, *, token: str | None = None,
                timeout: float = 10.0) -> list[dict[str, Any]]:
    """Every event of the trace, oldest first (follows pagination)."""
    events: list[dict[str, Any]] = []
    while True:
        query = urllib.parse.urlencode({"limit": PAGE, "offset": len(events)})
        url = (f"{base_url.rstrip('/')}/api/v1/traces/by-name/"
               f"{urllib.parse.quote(name, safe='')}?{query}")
        request = urllib.request.Request(url)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.load(response)
        events.extend(body["traces"])
        if not body["traces"] or len(events) >= body["total"]:
            return events


def render(name: str, events: list[dict[str, Any]], out: TextIO) -> None:
    if not events:
        print(f"trace {name!r}: no events", file=out)
        return
    messages = {(e["partition_id"], e["transaction_id"]) for e in events}
    print(f"trace {name!r}: {plural(len(events), 'event')} on "
          f"{plural(len(messages), 'message')}", file=out)
    rows = [(e["created_at"], f"{e['queue_name']}/{e['partition_name']}", e["consumer_group"],
             e["event_type"], e["transaction_id"],
             json.dumps(e["data"], separators=(",", ":"), ensure_ascii=False)) for e in events]
    headers = ("TIME", "QUEUE/PARTITION", "GROUP", "EVENT", "TRANSACTION", "DATA")
    widths = [max(len(headers[i]), *(len(r[i]) for r in rows)) for i in range(5)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers[:5], widths, strict=True))
    print(f"{line}  {headers[5]}", file=out)
    for row in rows:
        cells = "  ".join(c.ljust(w) for c, w in zip(row[:5], widths, strict=True))
        print(f"{cells}  {row[5]}", file=out)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _status_exit(status: int) -> Exit:
    if status in (401, 403):
        return Exit.AUTH
    if status == 404:
        return Exit.NOT_FOUND
    if status >= 500:
        return Exit.UNREACHABLE
    return Exit.REFUSED


def run(base_url: str, name: str, token: str | None) -> int:
    try:
        events = fetch_trace(base_url, name, token=token)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        print(f"queen-trio trace: {base_url} answered {exc.code}: {detail}", file=sys.stderr)
        return _status_exit(exc.code)
    except (urllib.error.URLError, OSError) as exc:
        print(f"queen-trio trace: cannot reach {base_url}: {exc}", file=sys.stderr)
        return Exit.UNREACHABLE
    render(name, events, sys.stdout)
    return Exit.OK if events else Exit.EMPTY
