"""Operations without PostgreSQL: time buckets, the activity counters, metric families and
their Prometheus rendering."""

from __future__ import annotations

import datetime as dt
import inspect
import typing

import pytest
from prometheus_client.parser import text_string_to_metric_families

from queen_trio.errors import BadRequest
from queen_trio.ops import activity as activity_module
from queen_trio.ops.activity import Activity, HistogramSnapshot, QueueActivity
from queen_trio.ops.metrics import (
    SCALAR_TABLES,
    Family,
    FamilyBook,
    ProcessFigures,
    merge,
    render_prometheus,
)
from queen_trio.ops.series import bucket_minutes_for, fill, parse_range

UTC = dt.timezone.utc


@pytest.mark.parametrize(("hours", "minutes"), [(1, 1), (2, 1), (3, 5), (12, 5), (24, 15),
                                                (48, 15), (72, 60), (24 * 8, 60), (24 * 9, 360)])
def test_bucket_width_follows_the_span(hours, minutes):
    assert bucket_minutes_for(dt.timedelta(hours=hours)) == minutes


def test_a_range_has_a_point_per_bucket():
    span = parse_range({"from": "2026-01-01T00:00:30Z", "to": "2026-01-01T00:05:00Z"})
    rows = [{"bucket": dt.datetime(2026, 1, 1, 0, 2, tzinfo=UTC), "n": 7}]
    points = fill(span, rows, lambda r: {"n": r["n"] if r else 0})
    assert [p["timestamp"][11:16] for p in points] == ["00:00", "00:01", "00:02", "00:03",
                                                       "00:04", "00:05"]
    assert [p["n"] for p in points] == [0, 0, 7, 0, 0, 0]


@pytest.mark.parametrize("query", [{"from": "noon"}, {"to": "later"},
                                   {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
                                   {"from": "1990-01-01T00:00:00Z"},
                                   {"to": "0001-01-01T00:30:00Z"},
                                   {"to": "9999-12-31T23:59:59Z"},
                                   {"bucketMinutes": "\u00b2"}, {"bucketMinutes": "\u0661"},
                                   {"bucketMinutes": "1" * 5000}, {"bucketMinutes": "7"}])
def test_bad_ranges_are_refused(query):
    with pytest.raises(BadRequest):
        parse_range(query)


def test_activity_counts_by_outcome_and_queue():
    a = Activity()
    a.record_push([{"status": "queued", "queueName": "q"}, {"status": "duplicate",
                                                            "queueName": "q"}])
    a.record_pop("q", {"queue": "q", "messages": [{}, {}]})
    a.record_pop("q", None)
    a.record_acks(["completed", "failed", "completed"], [
        {"success": True, "queueName": "q", "dlq": False},
        {"success": True, "queueName": "q", "dlq": False},
        {"success": False, "queueName": "q", "dlq": False}])
    a.record_request("GET", "/health", 200, 0.004)
    a.record_request("GET", "/health", 503, 0.2)
    a.record_bundle([3, 1])
    s = a.statistics()
    assert (s.push_requests, s.push_messages, dict(s.push_items)) == (
        1, 1, {"queued": 1, "duplicate": 1})
    assert (s.pop_requests, s.pop_empty, s.pop_messages) == (2, 1, 2)
    assert (s.ack_messages, s.nacked, s.ack_failed) == (1, 1, 1)
    q = s.queues["q"]
    assert (q.pushed, q.popped, q.pop_requests, q.pop_empty, q.acked, q.nacked) == (
        1, 2, 2, 1, 1, 1)
    assert (s.http_requests, s.http_errors) == (2, 1)
    assert s.latency[("GET", "/health")].count == 2
    assert (s.segment_sizes.count, s.segment_sizes.total, s.bundle_sizes.count) == (2, 4.0, 1)


def test_every_count_of_a_queue_lands_in_its_field():
    a = Activity()
    a.record_push([{"status": "queued", "queueName": "q"}])
    a.record_pop("q", {"queue": "q", "messages": [{}]})
    a.record_pop("q", None)
    a.record_acks(["completed", "dlq", "failed", "retry"], [
        {"success": True, "queueName": "q", "dlq": False},
        {"success": True, "queueName": "q", "dlq": True},
        {"success": False, "queueName": "q", "dlq": False},
        {"success": True, "queueName": "q", "dlq": False}])
    assert a.statistics().queues["q"] == QueueActivity(
        pushed=1, pop_requests=2, pop_empty=1, popped=1, acked=2, nacked=1, ack_failed=1,
        dead_lettered=1)


def test_an_empty_pop_adds_a_queue_only_while_there_is_room(monkeypatch):
    monkeypatch.setattr(activity_module, "MAX_QUEUES", 2)
    a = Activity()
    for name in ("made-up-1", "made-up-2", "made-up-3"):
        a.record_pop(name, None)
    a.record_push([{"status": "queued", "queueName": "real"}])  # a push proves its queue
    a.record_pop("made-up-1", None)  # counted already: it still counts
    s = a.statistics()
    assert sorted(s.queues) == ["made-up-1", "made-up-2", "real"]
    assert (s.pop_requests, s.pop_empty, s.queues["made-up-1"].pop_empty) == (4, 4, 2)


def test_forgetting_queues_keeps_what_was_counted_since_the_snapshot():
    a = Activity()
    for name in ("gone", "busy"):
        a.record_pop(name, None)
    snapshot = a.statistics().queues
    a.record_pop("busy", None)  # after the snapshot: the queue may exist by now
    assert a.forget_queues(["gone", "busy", "never-seen"], snapshot) == ["gone"]
    assert list(a.statistics().queues) == ["busy"]


def test_families_survive_json_and_render_once_per_name():
    one = FamilyBook(worker_id="a")
    one.counter("queen_x_total", "X.", 3, kind="k")
    one.add("queen_h", "histogram", "H.", HistogramSnapshot((1.0, 2.0), (1, 0, 2), 7.5, 3))
    two = FamilyBook(worker_id="b")
    two.counter("queen_x_total", "X.", 5, kind="k")
    stored = [Family.from_json(f.to_json()) for f in two.families()]
    families = merge([*one.families(), *stored])
    assert [f.name for f in families] == ["queen_x_total", "queen_h"]
    parsed = {f.name: f for f in text_string_to_metric_families(
        render_prometheus(families).decode())}
    counters = {s.labels["worker_id"]: s.value for s in parsed["queen_x"].samples
                if s.name == "queen_x_total"}
    assert counters == {"a": 3.0, "b": 5.0}
    buckets = {s.labels["le"]: s.value for s in parsed["queen_h"].samples
               if s.name == "queen_h_bucket"}
    assert buckets == {"1.0": 1.0, "2.0": 1.0, "+Inf": 3.0}


def _figure_type(path: str) -> object:
    """The declared type of `path` (`database.pool_size`) in ProcessFigures: a field's
    annotation, or a property's return annotation."""
    owner: type = ProcessFigures
    kind: object = owner
    for part in path.split("."):
        found = inspect.getattr_static(owner, part, None)
        if isinstance(found, property):
            kind = typing.get_type_hints(found.fget)["return"]
        else:
            kind = typing.get_type_hints(owner)[part]
        owner = kind if isinstance(kind, type) else object
    return kind


@pytest.mark.parametrize("family", [family for table in SCALAR_TABLES for family in table],
                         ids=lambda family: family[0])
def test_every_scalar_family_reads_a_number_of_the_process_figures(family):
    name, kind, help, path = family
    assert _figure_type(path) in (int, float, bool)
    assert kind in ("gauge", "counter") and help.endswith(".")
    assert name.startswith("queen_") and name.endswith("_total") == (kind == "counter")


def test_the_scalar_families_are_named_once():
    names = [family[0] for table in SCALAR_TABLES for family in table]
    assert len(names) == len(set(names))
