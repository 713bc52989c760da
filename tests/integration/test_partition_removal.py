"""A deleted partition takes its segments, transaction index rows and name with it: no foreign
key does it (migrations 0012 and 0013), the partitions_removed trigger does, whatever deletes
the row. A created partition is named by the partitions_named trigger, whatever inserts it."""

from __future__ import annotations

import uuid

from queen_trio.storage.sql import sql_objects
from tests.support.consuming import data, pop, push
from tests.support.db import db_execute, db_fetchval
from tests.support.storage import partition_id


async def rows_of(broker, table: str, queue: str) -> int:
    return await db_fetchval(broker.db,
        f"SELECT count(*) FROM queen.{table} t JOIN queen.partitions p ON p.id = t.partition_id "
        "JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1", queue)


async def names(broker) -> set[tuple[str, str]]:
    rows = await broker.db.call(lambda conn: conn.fetch(
        "SELECT q.name AS queue, n.name FROM queen.partition_names n "
        "JOIN queen.queues q ON q.id = n.queue_id"))
    return {(r["queue"], r["name"]) for r in rows}


async def test_deleting_a_queue_keeps_every_other_queues_messages(client, broker):
    await push(client, "doomed", 1, 2, partition="a")
    await push(client, "kept", 3, 4, partition="a")
    tables = ("segments", "transaction_index")
    kept = {table: await rows_of(broker, table, "kept") for table in tables}
    assert kept["transaction_index"] == 2
    r = await client.delete("/api/v1/resources/queues/doomed")
    assert r.status_code == 200 and r.json()["existed"] is True
    for table in tables:
        assert await db_fetchval(broker.db, f"SELECT count(*) FROM queen.{table}") == kept[table]
        assert await rows_of(broker, table, "kept") == kept[table], table
    assert data(await pop(client, "kept", partition="a", batch=10)) == [3, 4]
    assert await names(broker) == {("kept", "a")}


async def test_a_partition_deleted_by_any_statement_takes_its_rows(client, broker):
    await push(client, "q", 1, 2, partition="a")
    await push(client, "q", 3, partition="b")
    gone = await partition_id(broker.db, "q", "a")
    assert await db_fetchval(broker.db,
        "SELECT count(*) FROM queen.transaction_index WHERE partition_id = $1", gone) == 2
    await db_execute(broker.db, "DELETE FROM queen.partitions WHERE id = $1", gone)
    for table in ("segments", "transaction_index"):
        assert await db_fetchval(broker.db,
            f"SELECT count(*) FROM queen.{table} WHERE partition_id = $1", gone) == 0, table
        assert await rows_of(broker, table, "q") == 1, table
    assert await names(broker) == {("q", "b")}
    assert data(await pop(client, "q", partition="b")) == [3]


async def test_installing_the_trigger_sweeps_segments_left_without_a_partition(client, broker):
    # What a broker of the generation before could leave between migration 0012 and the
    # trigger's install: segments of a partition it deleted.
    await push(client, "q", 1, partition="a")
    orphan = uuid.uuid4()
    await db_execute(broker.db,
        "INSERT INTO queen.segments (partition_id, first_offset, message_count, created_at, "
        "frames, frame_ends) SELECT $1, 0, 1, now(), frames, frame_ends FROM queen.segments",
        orphan)
    (trigger,) = [o for o in sql_objects().objects if o.name == "triggers/partitions_removed"]
    await broker.db.call(lambda conn: conn.execute(trigger.text))
    assert await db_fetchval(broker.db,
        "SELECT count(*) FROM queen.segments WHERE partition_id = $1", orphan) == 0
    assert data(await pop(client, "q", partition="a")) == [1]


async def test_every_partition_created_is_named_and_pushes_find_it_by_name(client, broker):
    await push(client, "q", 1, partition="a")
    # A partition inserted by a statement of its own (as a broker of an older generation
    # would, or the default partition's insert) is named too.
    await db_execute(broker.db,
        "INSERT INTO queen.partitions (queue_id, name) SELECT id, 'b' FROM queen.queues "
        "WHERE name = 'q'")
    assert await names(broker) == {("q", "a"), ("q", "b")}
    b = await partition_id(broker.db, "q", "b")
    await push(client, "q", 2, partition="b")
    assert await partition_id(broker.db, "q", "b") == b
    assert data(await pop(client, "q", partition="b")) == [2]


async def test_installing_the_trigger_names_the_partitions_created_without_it(client, broker):
    # What a broker of the generation before could leave between migration 0013 and the
    # trigger's install: a partition without a name, the name of a partition it deleted.
    await push(client, "q", 1, partition="a")
    await db_execute(broker.db, "DELETE FROM queen.partition_names")
    await db_execute(broker.db,
        "INSERT INTO queen.partition_names (id, queue_id, name) "
        "SELECT $1, id, 'gone' FROM queen.queues WHERE name = 'q'", uuid.uuid4())
    (trigger,) = [o for o in sql_objects().objects if o.name == "triggers/partitions_named"]
    await broker.db.call(lambda conn: conn.execute(trigger.text))
    assert await names(broker) == {("q", "a")}
    await push(client, "q", 2, partition="a")
    assert data(await pop(client, "q", partition="a", batch=10)) == [1, 2]
