"""The test broker's settings, the template cache's place and key: no PostgreSQL needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from queen_trio.settings import AuthSettings, Settings
from queen_trio.testing import TestBroker, cluster_cache
from queen_trio.testing.options import (
    build_settings,
    cache_key,
    normalise,
    settings_from_json,
    settings_to_json,
)


def test_any_settings_field_is_accepted_and_encryption_means_a_fresh_key() -> None:
    overrides = normalise({"encryption": True, "default_batch_size": 5})
    first = build_settings(overrides, port=1234, database_url="postgresql://h/db")
    second = build_settings(overrides, port=1234, database_url="postgresql://h/db")
    assert first.default_batch_size == 5
    assert first.encryption_key is not None and len(first.encryption_key) == 64
    assert first.encryption_key != second.encryption_key
    # The test defaults: a small pool, a quick shutdown.
    assert (first.db_pool_size, first.graceful_timeout_seconds) == (10, 1.0)


def test_a_given_key_wins_over_encryption_true() -> None:
    key = "ab" * 32
    settings = build_settings(normalise({"encryption": True, "encryption_key": key}), port=1)
    assert settings.encryption_key == key


@pytest.mark.parametrize("name", ["host", "port", "data_dir", "database_url", "spool_dir",
                                  "workers", "app"])
def test_the_test_brokers_own_fields_cannot_be_given(name: str) -> None:
    with pytest.raises(TypeError, match=f"sets {name} itself"):
        normalise({name: "x"})


def test_an_unknown_setting_is_refused_at_once_without_a_process() -> None:
    with pytest.raises(TypeError, match="'batch' is not a setting"):
        TestBroker(batch=3)


def test_a_value_json_cannot_carry_is_refused() -> None:
    with pytest.raises(TypeError):
        normalise({"default_batch_size": object()})


def test_settings_travel_as_json_and_back() -> None:
    settings = Settings(data_dir=Path("/tmp/x"), spool_dir=Path("/tmp/y"),
                        auth=AuthSettings(enabled=True, secret="s"))
    assert settings_from_json(settings_to_json(settings)) == settings
    overrides = normalise({"auth": AuthSettings(enabled=True, secret="s")})
    assert build_settings(overrides, port=1).auth == AuthSettings(enabled=True, secret="s")


def test_the_broker_cache_key_ignores_argument_order() -> None:
    assert cache_key({"default_batch_size": 2, "encryption": True}) == cache_key(
        {"encryption": True, "default_batch_size": 2})
    assert cache_key({}) != cache_key({"encryption": True})


def test_the_cache_is_never_under_root_s_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cluster_cache.CACHE_ENV, raising=False)
    monkeypatch.setattr(cluster_cache.os, "geteuid", lambda: 0)
    monkeypatch.setenv("XDG_CACHE_HOME", "/root/.cache")
    assert cluster_cache.cache_root() == Path("/var/cache/queen-trio")


def test_the_cache_is_the_users_cache_directory(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.delenv(cluster_cache.CACHE_ENV, raising=False)
    monkeypatch.setattr(cluster_cache.os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cluster_cache.cache_root() == tmp_path / "xdg" / "queen-trio"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cluster_cache.cache_root() == tmp_path / "home" / ".cache" / "queen-trio"
    monkeypatch.setenv(cluster_cache.CACHE_ENV, str(tmp_path / "mine"))
    assert cluster_cache.cache_root() == tmp_path / "mine"


def test_the_template_key_names_postgres_and_changes_with_the_schema(
        monkeypatch: pytest.MonkeyPatch) -> None:
    key = cluster_cache.template_key()
    assert key.startswith(f"{cluster_cache.LAYOUT}-pg{cluster_cache.postgres_version()}-")
    assert cluster_cache.postgres_version().split(".")[0].isdigit()
    real = cluster_cache.migrations()
    assert f"schema{real[-1][0].split('_')[0]}-" in key
    edited = [*real[:-1], (real[-1][0], real[-1][1] + "\n-- edited\n")]
    monkeypatch.setattr(cluster_cache, "migrations", lambda: edited)
    assert cluster_cache.template_key() != key


def test_the_template_key_changes_with_a_function_view_or_trigger(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import attrs

    from queen_trio.storage.sql import SqlObject

    key = cluster_cache.template_key()
    real = cluster_cache.sql_objects()
    first = real.objects[0]
    edited = attrs.evolve(real, objects=(SqlObject(first.name, first.text + "\n-- edited\n"),
                                         *real.objects[1:]))
    monkeypatch.setattr(cluster_cache, "sql_objects", lambda: edited)
    assert cluster_cache.template_key() != key


@pytest.mark.parametrize(("settings", "said"), [
    ({"default_batch_size": "many"}, "default_batch_size='many' is not an integer"),
    ({"log_requests": 1}, "log_requests=1 is not true or false"),
    ({"encryption_key": 5}, "encryption_key=5 is not a string or None"),
    ({"cors_origins": "*"}, "cors_origins='*' is not a list of strings"),
    ({"log_level": "loud"}, "log_level='loud' is not a log level"),
    ({"default_batch_size": 0}, "DEFAULT_BATCH_SIZE must be at least 1 (default_batch_size=0)"),
])
def test_a_value_a_setting_cannot_take_is_refused_in_words(settings, said) -> None:
    # Issue 25, point 12: named in one line, before any process starts.
    with pytest.raises((TypeError, ValueError), match=re.escape(said)):
        normalise(settings)
