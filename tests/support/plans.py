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


# -- the operations routes' figures, planned over a table big enough to mean it ---------------

# 200 partitions of 50 one-message segments each (10,000 segments), 5 groups with cursors at
# 0, 5, ... 20 and a pending head an hour old.
BIG_QUEUE = """
INSERT INTO queen.queues (name, namespace, task) VALUES ('big', 'big', '');
INSERT INTO queen.partitions (queue_id, name, next_offset, last_commit_at)
SELECT q.id, 'p' || i, 50, now() FROM queen.queues q, generate_series(1, 200) i
 WHERE q.name = 'big';
INSERT INTO queen.segments (partition_id, first_offset, message_count, created_at, frames,
                            frame_ends)
SELECT p.id, s, 1, now() - (50 - s) * interval '1 second', '\\x00'::bytea, ARRAY[1]
  FROM queen.partitions p, generate_series(0, 49) s;
INSERT INTO queen.subscriptions (queue_id, consumer_group)
SELECT q.id, 'g' || g FROM queen.queues q, generate_series(0, 4) g;
INSERT INTO queen.consumer_state (partition_id, consumer_group, queue_id, cursor_offset, head_at)
SELECT p.id, 'g' || g, p.queue_id, g * 5, now() - interval '1 hour'
  FROM queen.partitions p, generate_series(0, 4) g;
ANALYZE;
"""


async def explain_query(db: Any, query: Any, **params: Any) -> dict[str, Any]:
    """EXPLAIN (ANALYZE) of a named query (`Q.name`): the plan tree as executed."""
    text = f"EXPLAIN (ANALYZE, FORMAT JSON) {query.text}"
    raw = await db.call(lambda conn: conn.fetchval(text, *query.args(params)))
    return json.loads(raw)[0]["Plan"]  # type: ignore[no-any-return]


def reads_of(plan: dict[str, Any], relation: str) -> list[dict[str, Any]]:
    """Every node of the plan that reads `relation`."""
    return [n for n in _nodes(plan) if n.get("Relation Name") == relation]
