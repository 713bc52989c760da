"""Query plans of the statements inside plpgsql functions, as PostgreSQL executed them.

auto_explain (shipped with the server) logs the plan of every statement, nested ones included,
and `client_min_messages = log` sends those log lines to the client as notices, where an
asyncpg log listener collects them. Everything is set with SET LOCAL inside a transaction
that is rolled back, so the statement's writes and the settings both go away.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import attrs

AUTO_EXPLAIN = ("SET LOCAL auto_explain.log_min_duration = 0",
                "SET LOCAL auto_explain.log_nested_statements = on",
                "SET LOCAL auto_explain.log_format = json",
                "SET LOCAL client_min_messages = log")


@attrs.frozen
class Scan:
    node: str               # "Index Scan", "Seq Scan", ...
    relation: str | None
    index: str | None
    index_cond: str | None


@attrs.frozen
class Plan:
    query: str  # the statement's text, whitespace collapsed
    tree: dict[str, Any]

    def scans(self) -> list[Scan]:
        return [Scan(n["Node Type"], n.get("Relation Name"), n.get("Index Name"),
                     n.get("Index Cond")) for n in _nodes(self.tree)]

    def describe(self) -> str:
        return self.query + "\n" + "\n".join(f"  {s}" for s in self.scans())


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


async def executed_plans(conn: Any, statement: str, *args: Any,
                         settings: tuple[str, ...] = ()) -> tuple[list[Plan], list[Any]]:
    """(the plan of every statement run, in order; the statement's rows), rolled back."""
    plans: list[Plan] = []

    def collect(_conn: Any, message: Any) -> None:
        head, found, body = message.message.partition("plan:\n")
        if found and head.startswith("duration:"):
            tree = json.loads(body)
            plans.append(Plan(" ".join(tree["Query Text"].split()), tree["Plan"]))

    conn.add_log_listener(collect)
    transaction = conn.transaction()
    await transaction.start()
    try:
        await conn.execute("LOAD 'auto_explain'")
        for setting in (*AUTO_EXPLAIN, *settings):
            await conn.execute(setting)
        rows = await conn.fetch(statement, *args)
        # Listeners run from the event loop, after the messages that preceded the reply.
        await asyncio.sleep(0)
    finally:
        await transaction.rollback()
        conn.remove_log_listener(collect)
    return plans, rows


def executions(plans: list[Plan], *fragments: str) -> list[Plan]:
    """Every execution of the one statement whose text holds all the fragments."""
    found = [p for p in plans if all(f in p.query for f in fragments)]
    statements = sorted({p.query[:160] for p in found or plans})
    assert found and len(statements) == 1, (
        f"{len(statements) if found else 0} statements hold {fragments}; planned:\n"
        + "\n".join(statements))
    return found


def uses_index(plan: Plan, index: str) -> bool:
    """The plan reads through `index` with a condition on it (not a whole-index walk)."""
    return any(scan.index == index and scan.index_cond for scan in plan.scans())


def seq_scans(plan: Plan) -> set[str]:
    return {scan.relation or "" for scan in plan.scans() if scan.node == "Seq Scan"}
