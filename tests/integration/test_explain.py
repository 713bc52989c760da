"""The hot queries read through their indexes: the claim, the dedup probe, the retention scans.

These statements live inside plpgsql functions, so the plans are the ones PostgreSQL executed
for the functions' own statements (auto_explain, tests/support/plans.py), on a database with
enough rows that a sequential scan would be the planner's choice wherever no index serves:
40 queues of 100 partitions, three groups each, 10 segments and 20 transaction ids per
partition. The claim and the dedup probe are planned as they are in production; the retention
pass with sequential scans priced out (the test says why).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence

import asyncpg
import pytest

from queen_trio.storage import frames
from queen_trio.storage.sql import Q
from tests.support.consuming import ack, pop, push
from tests.support.db import db_execute
from tests.support.plans import Plan, executed_plans, executions, reads_of, seq_scans, uses_index

# Deterministic data: every tenth partition of every group has something pending, a third of
# the queues keep segments 60 s (retentionSeconds), a fifth evict after 60 s (maxWaitTime).
POPULATE = [
    """INSERT INTO queen.queues (name, retention_seconds, max_wait_time_seconds)
       SELECT 'q' || n, CASE WHEN n % 3 = 0 THEN 60 ELSE 0 END,
              CASE WHEN n % 5 = 0 THEN 60 ELSE 0 END
         FROM generate_series(1, 40) n""",
    """INSERT INTO queen.partitions (queue_id, name, next_offset, last_commit_at)
       SELECT q.id, 'p' || n, 20, now() - interval '1 hour'
         FROM queen.queues q, generate_series(1, 100) n""",
    """INSERT INTO queen.subscriptions (queue_id, consumer_group)
       SELECT q.id, g FROM queen.queues q, unnest(ARRAY['__QUEUE_MODE__', 'g1', 'g2']) g""",
    """INSERT INTO queen.consumer_state (partition_id, consumer_group, queue_id, cursor_offset,
                                        head_at)
       SELECT p.id, s.consumer_group, p.queue_id, 10,
              CASE WHEN split_part(p.name, 'p', 2)::integer % 10 = 0
                   THEN now() - interval '2 hours' END
         FROM queen.partitions p JOIN queen.subscriptions s ON s.queue_id = p.queue_id""",
    """INSERT INTO queen.segments (partition_id, first_offset, message_count, created_at, frames,
                                  frame_ends)
       SELECT p.id, o * 2, 2, now() - interval '3 hours' + o * interval '1 minute', $1, $2
         FROM queen.partitions p, generate_series(0, 9) o""",
    """INSERT INTO queen.transaction_index (partition_id, transaction_id, message_offset,
                                           created_at)
       SELECT p.id, 'tx-' || o, o, now() - interval '1 minute'
         FROM queen.partitions p, generate_series(0, 19) o""",
    "ANALYZE",
]


def two_frames() -> tuple[bytes, list[int]]:
    first = frames.pack(uuid.uuid4().bytes, b"tx-a", b'{"n":1}')
    second = frames.pack(uuid.uuid4().bytes, b"tx-b", b'{"n":2}')
    return first + second, [len(first), len(first) + len(second)]


def plans_of(url: str, statement: str, *args: object, settings: tuple[str, ...] = ()):
    async def run():
        conn = await asyncpg.connect(url)
        try:
            return await executed_plans(conn, statement, *args, settings=settings)
        finally:
            await conn.close()

    return asyncio.run(run())


def populate(url: str, statements: Sequence[str] = POPULATE) -> None:
    """Run `statements` (POPULATE or its first few) on a connection of their own."""
    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            segment, ends = two_frames()
            for statement in statements:
                await conn.execute(statement, *((segment, ends) if "$1" in statement else ()))
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.fixture(scope="module")
def populated_url(module_database_url: str) -> Iterator[str]:
    populate(module_database_url)
    yield module_database_url


def test_the_claim_finds_pending_partitions_through_consumer_heads(populated_url):
    plans, rows = plans_of(populated_url, "SELECT * FROM queen.pop_claim('q7', NULL, 'g1', 10, 1, "
                           "gen_random_uuid(), false, 'all', NULL)")
    (claimed,) = {r["partition_name"] for r in rows}
    assert claimed in {f"p{n}" for n in range(10, 101, 10)}
    (candidates,) = executions(plans, "FROM queen.consumer_heads h",
                               "FOR UPDATE OF st SKIP LOCKED")
    # The group's heads in order, then each candidate's state row by its key.
    assert uses_index(candidates, "consumer_heads_pkey"), candidates.describe()
    assert uses_index(candidates, "consumer_state_pkey"), candidates.describe()
    assert not seq_scans(candidates), candidates.describe()


def test_the_dedup_probe_reads_the_transaction_index_primary_key(populated_url):
    segment, ends = two_frames()
    plans, rows = plans_of(
        populated_url,
        "SELECT * FROM queen.push_bundle(ARRAY['q7'], ARRAY['p3'], ARRAY[false], ARRAY[true], "
        "ARRAY[2], ARRAY[$1::bytea], $2::integer[], ARRAY['tx-3', 'new-1'])", segment, ends)
    assert sorted((r["outcome"], r["item_no"]) for r in rows) == [("duplicate", 1),
                                                                  ("queued", None)]
    (probe,) = executions(plans, "FROM queen.transaction_index ti", "LIMIT 1) t ON true")
    assert uses_index(probe, "transaction_index_pkey"), probe.describe()
    # ... and the stored segment holding the original, through the segments' primary key.
    assert uses_index(probe, "segments_pkey"), probe.describe()
    assert not seq_scans(probe), probe.describe()


def test_a_push_finds_its_partition_by_queue_and_name(database_url):
    # Both keys in the index condition, whatever the statistics when the plan was made
    # (push_bundle's plans are generic, made once per connection): planned on a database
    # autovacuum had not analyzed yet, as every new broker's is, the look-up matched queue_id
    # alone and read every partition of the queue, each version of each under a held xmin.
    populate(database_url, POPULATE[:2])
    segment, ends = two_frames()
    plans, rows = plans_of(
        database_url,
        "SELECT * FROM queen.push_bundle(ARRAY['q7'], ARRAY['p3'], ARRAY[false], ARRAY[true], "
        "ARRAY[2], ARRAY[$1::bytea], $2::integer[], ARRAY['new-a', 'new-b'])", segment, ends)
    assert [r["outcome"] for r in rows] == ["queued"]
    (resolve,) = executions(plans, "LEFT JOIN queen.queues qq ON qq.name = u.qname")
    (lookup,) = [s for s in resolve.scans() if s.relation == "partition_names"]
    assert lookup.index == "partition_names_queue_id_name_key", resolve.describe()
    assert "name" in (lookup.index_cond or ""), resolve.describe()


def test_the_head_of_a_caught_up_group_is_found_in_one_segment(populated_url):
    # Every ack that settles a partition's last message asks for the head past the end: the
    # look-up reads the last segment, not (filtering each out) every segment the partition
    # keeps. p3 holds 10 segments, offsets 0 to 19.
    plans, rows = plans_of(
        populated_url,
        "SELECT queen.head_after(p.id, 20) AS at_end, queen.head_after(p.id, 7) AS inside "
        "FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id "
        "WHERE q.name = 'q7' AND p.name = 'p3'",
        settings=("SET LOCAL auto_explain.log_analyze = on",))
    (row,) = rows
    assert row["at_end"] is None and row["inside"] is not None
    for plan in executions(plans, "FROM queen.segments s", "s.first_offset <= p_cursor"):
        (scan,) = reads_of(plan.tree, "segments")
        assert scan["Actual Rows"] <= 1, plan.describe()
        assert not scan.get("Rows Removed by Filter"), plan.describe()


def test_the_retention_scans_read_segments_and_consumer_state_through_their_indexes(
        populated_url):
    # Whether a bounded pass (LIMIT 1000) is cheaper as a sequential scan depends on the
    # tables' sizes, so here the question is "can it use the index?": with sequential scans
    # priced out, a statement that no index serves still scans sequentially.
    plans, rows = plans_of(populated_url, "SELECT * FROM queen.retention_pass(NULL, 1000)",
                           settings=("SET LOCAL enable_seqscan = off",))
    (result,) = rows
    assert result["expired"] == 1000 and result["evicted"] > 0
    # retentionSeconds: the segments older than the queue's limit, by partition and time.
    (expired,) = executions(plans, "WITH doomed AS", "q.retention_seconds > 0")
    assert uses_index(expired, "segments_partition_time"), expired.describe()
    assert "segments" not in seq_scans(expired), expired.describe()
    # maxWaitTimeSeconds: the groups with something pending for too long.
    (waiting,) = executions(plans, "JOIN queen.consumer_heads h", "q.max_wait_time_seconds > 0")
    assert uses_index(waiting, "consumer_heads_pkey"), waiting.describe()
    assert not {"consumer_heads", "consumer_state"} & seq_scans(waiting), waiting.describe()
    # ... and the segments of each such group, from the one holding its cursor: a range of
    # the primary key (segments_time, led by the commit time, would walk every partition's
    # old segment headers for each group; a run that ANALYZEd differently once chose it).
    for lookup in executions(plans, "SELECT max(s.first_offset) FROM queen.segments s"):
        assert uses_index(lookup, "segments_pkey"), lookup.describe()
    for scan in executions(plans, "SELECT s.first_offset, s.message_count, s.created_at"):
        assert uses_index(scan, "segments_pkey"), scan.describe()
        assert "segments_time" not in {s.index for s in scan.scans()}, scan.describe()
    # Where a cursor lands (queen.head_after), every time it is asked.
    for lookup in executions(plans, "SELECT s.created_at FROM queen.segments s",
                             "s.first_offset > p_cursor"):
        assert uses_index(lookup, "segments_pkey"), lookup.describe()


# 20,000 more dead letters of the queue's partition, each its own group's and transaction's.
BIG_DLQ = """
INSERT INTO queen.dead_letters (queue_id, partition_id, partition_name, consumer_group,
                                message_offset, message_id, transaction_id, frame,
                                message_created_at, error_message, retry_count)
SELECT d.queue_id, d.partition_id, d.partition_name, 'other-' || n, d.message_offset,
       d.message_id, 'tx-' || n, d.frame, d.message_created_at, d.error_message, d.retry_count
  FROM queen.dead_letters d, generate_series(1, 20000) n;
ANALYZE queen.dead_letters;
"""


async def test_an_ack_finds_retried_dead_letters_in_flight_through_their_index(client, broker):
    async def planned_ack(message):
        return await broker.db.call(lambda conn: executed_plans(
            conn, "SELECT * FROM queen.ack_batch($1, $2, $3, $4, $5, $6)", ["g"],
            [uuid.UUID(message["partitionId"])], [message["transactionId"]], ["completed"],
            [uuid.UUID(message["leaseId"])], [None]))

    await push(client, "acks", "dead", "live")
    dead = (await pop(client, "acks", batch=1, consumerGroup="g"))["messages"][0]
    assert (await ack(client, dead, "dlq", group="g"))["dlq"]
    await db_execute(broker.db, BIG_DLQ)
    # Nothing retried in flight, the common case: one probe of an empty index answers it.
    live = (await pop(client, "acks", batch=1, consumerGroup="g"))["messages"][0]
    plans, rows = await planned_ack(live)
    assert [r["success"] for r in rows if r["item_no"] is not None] == [True]
    (probe,) = executions(plans, "EXISTS (SELECT 1 FROM queen.dead_letters dl "
                          "WHERE dl.retry_lease_id IS NOT NULL)")
    assert "dead_letters_retry_lease" in {s.index for s in probe.scans()}, probe.describe()
    assert "dead_letters" not in seq_scans(probe), probe.describe()
    # One in flight: settling it reads the dead letters through indexes too.
    assert (await ack(client, live, group="g"))["success"]
    r = await client.post(f"/api/v1/messages/{dead['partitionId']}/{dead['transactionId']}/retry")
    assert r.status_code == 200, r.text
    copy = (await pop(client, "acks", consumerGroup="g"))["messages"][0]
    assert copy["transactionId"] == dead["transactionId"]
    plans, rows = await planned_ack(copy)
    assert [r["success"] for r in rows if r["item_no"] is not None] == [True]
    assert any(r["released"] for r in rows)
    for plan in plans:
        assert "dead_letters" not in seq_scans(plan), plan.describe()
    (release,) = executions(plans, "dl.retry_lease_id = cs.lease_id")
    assert uses_index(release, "dead_letters_retry_lease"), release.describe()


# A lease on three partitions of q7 for group g1, then 40,000 leases that came and went while
# a REPEATABLE READ transaction holds the xmin horizon: the table keeps three live rows and
# every dead one, and the statistics count the live rows only.
LEASES_UNDER_A_HOLD = [
    """UPDATE queen.consumer_state cs
          SET lease_id = '00000000-0000-7000-8000-000000000001',
              lease_expires_at = now() + interval '1 minute', delivered_until = 11
         FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
        WHERE cs.partition_id = p.id AND cs.consumer_group = 'g1'
          AND q.name = 'q7' AND p.name IN ('p3', 'p4', 'p5')""",
    """INSERT INTO queen.consumer_leases (lease_id, partition_id, consumer_group)
       SELECT gen_random_uuid(), p.id, 'gone' || n FROM queen.partitions p, generate_series(1, 10) n""",
    "DELETE FROM queen.consumer_leases WHERE consumer_group LIKE 'gone%'",
    "VACUUM ANALYZE queen.consumer_leases",
]
LEASE_ID = uuid.UUID("00000000-0000-7000-8000-000000000001")
LEASE = f"'{LEASE_ID}'::uuid"


def test_a_lease_is_found_by_key_however_many_dead_leases_a_hold_keeps(database_url):
    # Priced by statistics that count three live rows against 40,000 index entries, a look-up
    # by key costs more than scanning the table (the index's pages over its tuples), and the
    # scan then reads every dead lease at every lease's end (an ack, a claim's next lease, a
    # release), every renewal, every transaction's requiredLeases and every ack that ends a
    # lease of retried dead letters.
    populate(database_url, POPULATE[:4])

    async def run() -> dict[str, list[Plan]]:
        holder = await asyncpg.connect(database_url)
        conn = await asyncpg.connect(database_url)
        try:
            await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            await holder.fetchval("SELECT count(*) FROM queen.queues")
            for statement in LEASES_UNDER_A_HOLD:
                await conn.execute(statement)
            live = await conn.fetchval("SELECT count(*) FROM queen.consumer_leases")
            assert live == 3
            planned = {}
            for name, statement, args in [
                    ("extend", f"SELECT * FROM queen.extend_lease({LEASE}, 30)", ()),
                    ("release", f"SELECT * FROM queen.release_lease({LEASE})", ()),
                    ("required", Q.live_leases.text, Q.live_leases.args({"lease_ids": [LEASE_ID]})),
                    # What an ack of retried dead letters reads for the leases it ends.
                    ("retried", f"SELECT * FROM queen.leases_by_id(ARRAY[{LEASE}])", ()),
                    ("end", "UPDATE queen.consumer_state SET lease_id = NULL, "
                            f"lease_expires_at = NULL WHERE lease_id = {LEASE}", ())]:
                planned[name], _ = await executed_plans(conn, statement, *args)
            return planned
        finally:
            await holder.close()
            await conn.close()

    for name, plans in asyncio.run(run()).items():
        lookups = [plan for plan in plans if "queen.consumer_leases" in plan.query]
        assert lookups, f"{name}: no statement read queen.consumer_leases"
        for plan in lookups:
            assert "consumer_leases" not in seq_scans(plan), plan.describe()
            assert uses_index(plan, "consumer_leases_pkey"), plan.describe()


# Pushes to q7's p3 while a REPEATABLE READ transaction holds the xmin horizon: each updates the
# partition row, so the hold keeps every version of it.
PUSH_P3 = ("SELECT * FROM queen.push_bundle(ARRAY['q7'], ARRAY['p3'], ARRAY[false], ARRAY[true], "
           "ARRAY[2], ARRAY[$1::bytea], $2::integer[], $3::text[])")


def test_a_partition_is_named_in_one_version_however_many_pushes_a_hold_keeps(database_url):
    # A push resolves (queue, name), a claim names what it claimed, an ack names what it
    # settles: read from the partition rows, each look-up walked every version a hold keeps
    # of a row that every push updates. partition_names is written once per partition.
    populate(database_url, POPULATE[:4])
    segment, ends = two_frames()
    buffers = ("SET LOCAL auto_explain.log_analyze = on",
               "SET LOCAL auto_explain.log_buffers = on")

    async def run() -> dict[str, list[Plan]]:
        holder = await asyncpg.connect(database_url)
        conn = await asyncpg.connect(database_url)
        try:
            # g1 caught up with q7's partitions (p3's 20 offsets so far: POPULATE writes no
            # segments), so that what the pushes below write to p3 is all it has pending.
            await conn.execute(
                "UPDATE queen.consumer_state cs SET cursor_offset = 20, head_at = NULL "
                "FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id "
                "WHERE cs.partition_id = p.id AND q.name = 'q7'")
            await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            await holder.fetchval("SELECT count(*) FROM queen.queues")
            for n in range(300):
                await conn.fetch(PUSH_P3, segment, ends, [f"tx-{n}-a", f"tx-{n}-b"])
            planned = {"push": (await executed_plans(conn, PUSH_P3, segment, ends,
                                                     ["tx-a", "tx-b"], settings=buffers))[0]}
            planned["claim"], _ = await executed_plans(
                conn, "SELECT * FROM queen.pop_claim('q7', 'p3', 'g1', 1, 1, gen_random_uuid(), "
                      "false, 'all', NULL)", settings=buffers)
            planned["unnamed claim"], _ = await executed_plans(
                conn, "SELECT * FROM queen.pop_claim('q7', NULL, 'g1', 1, 1, gen_random_uuid(), "
                      "false, 'all', NULL)", settings=buffers)
            lease = uuid.uuid4()
            claimed = await conn.fetchrow(
                "SELECT * FROM queen.pop_claim('q7', 'p3', 'g1', 1, 1, $1, false, 'all', NULL)",
                lease)
            assert claimed["partition_name"] == "p3"
            planned["ack"], rows = await executed_plans(
                conn, "SELECT * FROM queen.ack_batch(ARRAY['g1'], ARRAY[$1::uuid], ARRAY[$2], "
                      "ARRAY['completed'], ARRAY[$3::uuid], ARRAY[NULL])",
                claimed["partition_id"], "tx-0-a", lease, settings=buffers)
            assert [r["success"] for r in rows if r["item_no"] is not None] == [True]
            return planned
        finally:
            await holder.close()
            await conn.close()

    planned = asyncio.run(run())
    lookups = {
        "push": executions(planned["push"], "LEFT JOIN queen.queues qq ON qq.name = u.qname"),
        "claim": executions(planned["claim"], "SELECT p.id FROM", "p.name = p_partition"),
        "claim's name": executions(planned["unnamed claim"], "SELECT p.name FROM",
                                   "p.id = cs.partition_id"),
        "ack": executions(planned["ack"], "cs.ctid AS row_at"),
    }
    for name, plans in lookups.items():
        for plan in plans:
            assert "partitions" not in {s.relation for s in plan.scans()}, plan.describe()
            named = reads_of(plan.tree, "partition_names")
            assert named, plan.describe()
            for scan in named:
                # An index's root and leaf, and the row's one version.
                assert scan["Shared Hit Blocks"] + scan["Shared Read Blocks"] <= 3, (
                    name, plan.describe())
