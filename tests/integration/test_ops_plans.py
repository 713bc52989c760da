"""No aggregate of the operations routes reads the messages (issue 9): depth and lag come from
the partitions' offsets and the groups' cursors. Checked on EXPLAIN ANALYZE plans over 10,000
segments, so the planner chooses as it would on a big database."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from queen_trio.storage.sql import Q
from tests.support.db import db_execute, db_fetchval
from tests.support.plans import BIG_QUEUE, explain_query, reads_of

PARTITIONS = 200


@pytest.fixture
async def big(broker):
    await db_execute(broker.db, BIG_QUEUE)
    return await db_fetchval(broker.db, "SELECT id FROM queen.queues WHERE name = 'big'")


def assert_probes_only(plan, partitions=PARTITIONS):
    """Segments are read only by the one-row low-offset probe per partition."""
    for node in reads_of(plan, "segments"):
        assert node["Node Type"] in ("Index Scan", "Index Only Scan"), node["Node Type"]
        assert node["Actual Rows"] <= 1, node
        assert node["Actual Loops"] <= partitions, node
    assert reads_of(plan, "transaction_index") == []


@pytest.mark.parametrize("name, params", [
    ("resources_overview", {}),
    ("resources_queues", {"namespace": None, "task": None, "search": None, "limit": 100,
                          "offset": 0}),
    ("resources_namespaces", {"by": "namespace"}),
    ("resources_partitions", {"queue_id": None, "limit": 1000, "offset": 0}),
    ("metrics_queues", {}),
    ("status_live", {"queues": None}),
])
async def test_queue_figures_probe_each_partition_once(broker, big, name, params):
    assert_probes_only(await explain_query(broker.db, getattr(Q, name), **params))


async def test_queue_detail_and_depth_probe_each_partition_once(broker, big):
    assert_probes_only(await explain_query(broker.db, Q.resources_queue_partitions, queue_id=big))
    assert_probes_only(await explain_query(broker.db, Q.resources_depth, queue_id=big,
                                     consumer_group=None))


@pytest.mark.parametrize("name, params", [
    ("groups_list", {}),
    ("groups_lagging", {"min_lag": 60.0, "limit": 1000}),
    ("group_detail", {"consumer_group": "g1"}),
    ("resources_depth", {"consumer_group": "g1"}),
])
async def test_group_figures_never_read_segments(broker, big, name, params):
    if name == "resources_depth":
        params = {**params, "queue_id": big}
    plan = await explain_query(broker.db, getattr(Q, name), **params)
    assert reads_of(plan, "segments") == []
    assert reads_of(plan, "transaction_index") == []


async def test_figures_match_the_data(client, big):
    depth = (await client.get("/api/v1/resources/queues/big/depth")).json()
    assert depth["pending"] == PARTITIONS * 50  # g0's cursor is at 0
    g4 = (await client.get("/api/v1/resources/queues/big/depth?group=g4")).json()
    assert g4["pending"] == PARTITIONS * 30
    groups = (await client.get("/api/v1/consumer-groups")).json()
    assert len(groups) == 5 and all(g["members"] == PARTITIONS for g in groups)


async def test_message_list_walks_headers_through_an_index_and_reads_only_its_page(broker, big):
    now = dt.datetime.now(dt.timezone.utc)
    walk = await explain_query(broker.db, Q.message_headers, range_from=now - dt.timedelta(hours=1),
                         range_to=now, partition_ids=None, before_at=dt.datetime.max.replace(
                             tzinfo=dt.timezone.utc), before_partition=uuid.UUID(int=2**128 - 1),
                         before_offset=2**63 - 1, chunk=256)
    (scan,) = reads_of(walk, "segments")
    assert scan["Node Type"] == "Index Only Scan" and scan["Index Name"] == "segments_time"
    assert scan["Actual Rows"] == 256  # stops at the chunk: no sort of the whole range
    pid = await db_fetchval(broker.db, "SELECT id FROM queen.partitions WHERE name = 'p7'")
    one = await explain_query(broker.db, Q.message_headers_partition, partition_id=pid,
                        range_from=now - dt.timedelta(hours=1), range_to=now,
                        before_offset=2**63 - 1, chunk=20)
    for node in reads_of(one, "segments"):
        assert node["Node Type"] in ("Index Scan", "Index Only Scan")
        assert node["Actual Rows"] <= 20
    frames = await explain_query(broker.db, Q.message_frames, partition_ids=[pid, pid],
                           first_offsets=[3, 4], skips=[0, 0], takes=[1, 1])
    (fetch,) = reads_of(frames, "segments")
    assert fetch["Node Type"] == "Index Scan" and fetch["Actual Rows"] * fetch["Actual Loops"] == 2
