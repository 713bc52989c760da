"""Queue options (queues/options.py): wire names, defaults, strict validation, merge rules."""

from __future__ import annotations

import pytest

from queen_trio.queues.options import (
    FIELDS,
    INT32_MAX,
    WIRE_NAMES,
    OptionsError,
    QueueOptions,
    effective,
    merge,
    split_known,
)


def test_wire_names_are_camel_case_and_cover_every_field():
    assert WIRE_NAMES["leaseTime"] == "lease_time"
    assert WIRE_NAMES["dlqAfterMaxRetries"] == "dlq_after_max_retries"
    assert WIRE_NAMES["completedRetentionSeconds"] == "completed_retention_seconds"
    assert sorted(WIRE_NAMES.values()) == sorted(FIELDS)
    assert set(QueueOptions().to_wire()) == set(WIRE_NAMES)


def test_a_configured_queue_leases_300s_and_an_implicit_one_60s():
    assert QueueOptions().lease_time == 300
    assert QueueOptions.implicit() == QueueOptions(lease_time=60)
    assert effective({}) == QueueOptions()


def test_effective_overlays_the_explicit_options_on_the_defaults():
    options = effective({"leaseTime": 10, "retryLimit": 0, "encryptionEnabled": True})
    assert (options.lease_time, options.retry_limit, options.encryption_enabled) == (10, 0, True)
    assert options.ttl == QueueOptions().ttl
    assert options.to_wire()["leaseTime"] == 10
    assert options.to_columns()["lease_time"] == 10


def test_an_integral_float_is_an_integer_but_a_bool_is_not():
    assert effective({"ttl": 60.0}).ttl == 60
    with pytest.raises(OptionsError, match="ttl must be an integer"):
        effective({"ttl": True})
    with pytest.raises(OptionsError, match="ttl must be an integer"):
        effective({"ttl": 1.5})
    with pytest.raises(OptionsError, match="ttl must be an integer"):
        effective({"ttl": "60"})


def test_a_boolean_option_takes_only_a_boolean():
    with pytest.raises(OptionsError, match="retentionEnabled must be a boolean"):
        effective({"retentionEnabled": 1})


@pytest.mark.parametrize("name", ["leaseTime", "retryLimit", "maxSize", "ttl",
                                  "dedupWindowSeconds", "maxWaitTimeSeconds"])
def test_counts_and_durations_are_between_0_and_int32_max(name):
    assert effective({name: INT32_MAX}).to_wire()[name] == INT32_MAX
    with pytest.raises(OptionsError, match=f"{name} must be between 0 and {INT32_MAX}"):
        effective({name: -1})
    with pytest.raises(OptionsError, match=f"{name} must be between 0 and {INT32_MAX}"):
        effective({name: INT32_MAX + 1})


def test_priority_may_be_negative_but_stays_in_int32():
    assert effective({"priority": -5}).priority == -5
    with pytest.raises(OptionsError, match="priority is out of range"):
        effective({"priority": 2**31})


def test_every_bad_option_is_named_in_one_message():
    with pytest.raises(OptionsError) as caught:
        effective({"ttl": "x", "retentionEnabled": "yes"})
    message = str(caught.value)
    assert "option ttl must be an integer" in message
    assert "option retentionEnabled must be a boolean" in message
    assert "; " in message


def test_split_known_keeps_unknown_names_in_request_order():
    known, unknown = split_known({"zeta": 1, "leaseTime": 5, "alpha": 2, "ttl": 9})
    assert known == {"leaseTime": 5, "ttl": 9}
    assert unknown == ["zeta", "alpha"]


def test_merge_overlays_and_null_resets_an_option():
    current = {"leaseTime": 10, "ttl": 20}
    assert merge(current, {"ttl": None, "retryLimit": 1}, replace=False) == {
        "leaseTime": 10, "retryLimit": 1}
    assert current == {"leaseTime": 10, "ttl": 20}


def test_replace_makes_the_request_the_whole_configuration():
    assert merge({"leaseTime": 10, "ttl": 20}, {"ttl": 5, "maxSize": None}, replace=True) == {
        "ttl": 5}
