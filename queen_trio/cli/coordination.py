"""`queen-trio kv get|put|del|list` and `queen-trio locks list`: KV and lock permits, through
POST /api/v1/kv and GET /api/v1/resources/locks (docs/kv-and-locks.md)."""

from __future__ import annotations

import json
from typing import Any

import click

from ..exits import Exit
from .api import Api, segment
from .connection import Connection, request_options
from .failures import CliError
from .help import examples
from .output import Output, col, compact

ROW_COLUMNS = [
    col("KEY", "key"), col("VALUE", lambda r: compact(r.get("value"))),
    col("VERSION", "version"), col("EXPIRES", lambda r: r.get("expiresAt") or "never"),
    col("UPDATED", "updatedAt", wide=True),
]


def _one(api: Api, op: dict[str, Any]) -> dict[str, Any]:
    body = api.post("/api/v1/kv", {"operations": [op]})
    results = body.get("results") if isinstance(body, dict) else None
    if not results:
        raise CliError("the broker answered no result", Exit.REFUSED)
    result: dict[str, Any] = results[0]
    return result


@click.group(epilog=examples("queen-trio kv put app greeting '\"hello\"' --ttl 3600",
                             "queen-trio kv get app greeting",
                             "queen-trio kv list app --prefix config/"))
def kv() -> None:
    """Keys and values (client.kv): get, put, delete, list by prefix."""


@kv.command("get", epilog=examples("queen-trio kv get app greeting -o json"))
@click.argument("ns")
@click.argument("key")
@request_options()
def get(connection: Connection, out: Output, ns: str, key: str) -> int:
    """Print the live value of KEY in namespace NS, its version and expiry. Exits 5 when the
    key is absent (or expired)."""
    result = _one(Api(connection), {"op": "get", "ns": ns, "key": key})
    if not result.get("found"):
        out.say(f"no key {key!r} in {ns}", result, "")
        return Exit.NOT_FOUND
    out.record(result, ROW_COLUMNS, name=key)
    return Exit.OK


@kv.command("put", epilog=examples("queen-trio kv put app counter 0 --forever",
                                   "queen-trio kv put app greeting '\"hi\"' --ttl 60 --expect 4"))
@click.argument("ns")
@click.argument("key")
@click.argument("value")
@click.option("--ttl", type=click.IntRange(1), help="Seconds the key lives.")
@click.option("--forever", is_flag=True, help="The key never expires.")
@click.option("--expect", type=click.IntRange(0),
              help="Write only at this version (0: only if the key does not exist).")
@request_options()
def put(connection: Connection, out: Output, ns: str, key: str, value: str, ttl: int | None,
        forever: bool, expect: int | None) -> int:
    """Set KEY in namespace NS to VALUE (JSON; text that is not JSON is taken as a string).
    Give exactly one of --ttl and --forever. Exits 1 when --expect does not hold."""
    if (ttl is None) == (not forever):
        raise click.UsageError("give exactly one of --ttl SECONDS and --forever")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    op: dict[str, Any] = {"op": "put", "ns": ns, "key": key, "value": parsed}
    op.update({"ttlSeconds": ttl} if ttl is not None else {"forever": True})
    if expect is not None:
        op["expect"] = expect
    result = _one(Api(connection), op)
    if not result.get("applied"):
        out.say(f"not written: {result.get('reason')} (version {result.get('version')})",
                result, "")
        return Exit.REFUSED
    out.say(f"{ns}/{key} written, version {result['version']}", result, key)
    return Exit.OK


@kv.command("del", epilog=examples("queen-trio kv del app greeting"))
@click.argument("ns")
@click.argument("key")
@click.option("--expect", type=click.IntRange(1), help="Delete only at this version.")
@request_options()
def delete(connection: Connection, out: Output, ns: str, key: str, expect: int | None) -> int:
    """Delete KEY from namespace NS. Exits 5 when it was absent, 1 when --expect did not
    hold."""
    op: dict[str, Any] = {"op": "delete", "ns": ns, "key": key}
    if expect is not None:
        op["expect"] = expect
    result = _one(Api(connection), op)
    if not result.get("applied"):
        out.say(f"not deleted: {result.get('reason')}", result, "")
        return Exit.NOT_FOUND if result.get("reason") == "absent" else Exit.REFUSED
    out.say(f"{ns}/{key} deleted", result, key)
    return Exit.OK


@kv.command("list", epilog=examples("queen-trio kv list", "queen-trio kv list app",
                                    "queen-trio kv list app --prefix user/ -o name"))
@click.argument("ns", required=False)
@click.option("--prefix", default="", help="Only keys that start with this.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@request_options()
def list_keys(connection: Connection, out: Output, ns: str | None, prefix: str,
              limit: int) -> int:
    """Without NS: every namespace with its live keys. With NS: its live keys (whose key
    starts with --prefix), in byte order. Exits 4 when there is none."""
    api = Api(connection)
    if ns is None:
        spaces = api.get("/api/v1/resources/kv")["namespaces"]
        out.rows(spaces, [col("NAMESPACE", "namespace"), col("KEYS", "rows"),
                          col("BYTES", "bytes"), col("NEXT EXPIRY", "nextExpiry"),
                          col("LAST WRITE", "lastWrite", wide=True)], name="namespace")
        return Exit.OK if spaces else Exit.EMPTY
    rows: list[dict[str, Any]] = []
    after = ""
    while len(rows) < limit:
        page = api.get(f"/api/v1/resources/kv/{segment(ns)}", prefix=prefix, after=after,
                       limit=min(1000, limit - len(rows)))
        rows.extend(page["rows"])
        if not page.get("truncated") or not page.get("nextAfter"):
            break
        after = page["nextAfter"]
    out.rows(rows, ROW_COLUMNS, name="key")
    return Exit.OK if rows else Exit.EMPTY


@click.group(epilog=examples("queen-trio locks list"))
def locks() -> None:
    """Locks and semaphores (client.lock, client.semaphore)."""


@locks.command("list", epilog=examples("queen-trio locks list -o wide"))
@request_options()
def list_locks(connection: Connection, out: Output) -> int:
    """Every permit held now: lock, slot, holder, fencing token, expiry. Exits 4 when none
    is held."""
    held = Api(connection).get("/api/v1/resources/locks")["locks"]
    out.rows(held, [col("LOCK", "name"), col("SLOT", "slot"), col("HOLDER", "owner"),
                    col("TOKEN", "token"), col("EXPIRES", "expiresAt"),
                    col("SINCE", "since", wide=True), col("RENEWED", "renewedAt", wide=True)],
             name=lambda r: f"{r['name']}#{r['slot']}")
    return Exit.OK if held else Exit.EMPTY
