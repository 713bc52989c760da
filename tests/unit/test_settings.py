"""Settings refuse what cannot work, naming the variable (or flag) and its value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from queen_trio.settings import (
    AuthSettings,
    Bound,
    ConfigError,
    Settings,
    database_url_from_env,
    declarations,
    shown_default,
)


@pytest.mark.parametrize("raw", ["true", "TRUE", "1", " True "])
def test_booleans_accept_true_and_1_in_any_case(raw: str) -> None:
    assert Settings.from_env({"LOG_REQUESTS": raw}).log_requests is True


@pytest.mark.parametrize("raw", ["false", "False", "0"])
def test_booleans_accept_false_and_0(raw: str) -> None:
    assert Settings.from_env({"LOG_REQUESTS": raw}).log_requests is False


@pytest.mark.parametrize(("name", "raw"), [("JWT_ENABLED", "yes"), ("JWT_ENABLED", "on"),
                                           ("JWT_ALLOW_NO_EXP", "y"), ("LOG_REQUESTS", "2")])
def test_any_other_boolean_is_refused_never_read_as_off(name: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=f"{name}='{raw}' is not a boolean"):
        Settings.from_env({name: raw})


def test_log_level_and_format() -> None:
    assert Settings.from_env({}).log_level == "info"
    assert Settings.from_env({"LOG_LEVEL": "DEBUG"}).log_level == "debug"
    assert Settings.from_env({"LOG_FORMAT": "Text"}).log_format == "text"
    assert Settings.from_env({}).log_format is None
    with pytest.raises(ConfigError, match="LOG_LEVEL='chatty' is not a log level"):
        Settings.from_env({"LOG_LEVEL": "chatty"})
    with pytest.raises(ConfigError, match="--log-level='chatty'"):
        Settings.from_env({"LOG_LEVEL": "debug"}, log_level="chatty")


@pytest.mark.parametrize(("env", "flag", "named"), [
    ({"DATABASE_URL": "mysql://db/q"}, None, "DATABASE_URL='mysql://db/q' is not a PostgreSQL"),
    ({"DATABASE_URL": "postgresql://u:pw@db:port/q"}, None, "does not parse"),
    ({"DATABASE_URL": "postgresql:///q"}, None, "names no host"),
    ({"PG_HOST": "db", "PG_PORT": "x"}, None, "PG_PORT='x'"),
    ({}, "sqlite:///q.db", "--database-url='sqlite:///q.db'"),
])
def test_database_urls_that_cannot_work_are_refused(env, flag, named) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env, database_url=flag)
    assert named in str(caught.value)
    assert ":pw@" not in str(caught.value)


@pytest.mark.parametrize("url", ["postgresql://u:pw@db:5432/q", "postgres://db/q",
                                 "postgresql://u@h1:5432,h2:5433/q",
                                 "postgresql:///q?host=/var/run/postgresql"])
def test_database_urls_that_can_work_pass(url: str) -> None:
    assert Settings.from_env({"DATABASE_URL": url}).database_url == url


def test_a_flag_is_named_when_it_is_the_source() -> None:
    with pytest.raises(ConfigError, match="--port=0 is out of range"):
        Settings.from_env({"PORT": "7000"}, port=0)
    with pytest.raises(ConfigError, match="PORT=70000 is out of range"):
        Settings.from_env({"PORT": "70000"})


def test_database_url_from_env():
    assert database_url_from_env({}) is None
    assert database_url_from_env({"DATABASE_URL": "postgresql://x/y"}) == "postgresql://x/y"
    assert database_url_from_env({"PG_HOST": "db", "PG_PASSWORD": "p@ss", "PG_DB": "queen"}) == (
        "postgresql://postgres:p%40ss@db:5432/queen")


def test_settings_from_env_and_errors():
    s = Settings.from_env({"PORT": "7000", "QUEEN_V2_FUSION_HOLD_MS": "5", "DB_POOL_SIZE": "30",
                           "QUEEN_DATA_DIR": "/tmp/q"})
    assert (s.port, s.fusion_hold_ms, s.db_pool_size, s.data_dir) == (7000, 5.0, 30, Path("/tmp/q"))
    with pytest.raises(ConfigError, match="PORT='abc'"):
        Settings.from_env({"PORT": "abc"})
    with pytest.raises(ConfigError, match="QUEEN_PUSH_SHARDS"):
        Settings.from_env({"QUEEN_PUSH_SHARDS": "0"})
@pytest.mark.parametrize(("cpus", "workers"), [(1, 1), (2, 2), (3, 3), (8, 8), (32, 8)])
def test_workers_default_to_one_per_usable_cpu_up_to_eight(cpus: int, workers: int) -> None:
    from queen_trio.settings import default_workers

    assert default_workers(cpus) == workers


def test_workers_come_from_queen_workers_or_the_flag() -> None:
    assert Settings.from_env({"QUEEN_WORKERS": "3"}).workers == 3
    assert Settings.from_env({"QUEEN_WORKERS": "3"}, workers=2).workers == 2
    with pytest.raises(ConfigError, match="QUEEN_WORKERS=0 is out of range"):
        Settings.from_env({"QUEEN_WORKERS": "0"})
    with pytest.raises(ConfigError, match="--worker-ports 65535 with 2 workers"):
        Settings.from_env({}, workers=2, worker_ports=65535)


def test_each_worker_gets_a_share_of_the_pool_and_the_cluster_room_for_all() -> None:
    one = Settings(workers=1, db_pool_size=20, push_shards=4)
    assert one.pool_per_worker == 20
    assert one.embedded_max_connections == 100  # PostgreSQL's default: room for another broker
    four = Settings(workers=4, db_pool_size=20, push_shards=4)
    assert four.pool_per_worker == 6  # never below the push shards + 2
    eight = Settings(workers=8, db_pool_size=160, push_shards=4)
    assert eight.pool_per_worker == 20
    # every pool (KV's too), LISTEN and the ephemeral membership session, the reserve
    assert eight.embedded_max_connections == 8 * (21 + 4 + 1) + 10


@pytest.mark.parametrize(("workers", "shards"), [(1, 2), (2, 1), (3, 1), (4, 1), (8, 1)])
def test_the_push_shards_of_a_broker_are_split_over_its_workers(workers: int, shards: int) -> None:
    settings = Settings(workers=workers, db_pool_size=20)
    assert settings.lane_shards == shards
    assert Settings.from_env({"QUEEN_WORKERS": str(workers)}).lane_shards == shards


def test_queen_push_shards_sets_each_workers_count() -> None:
    settings = Settings.from_env({"QUEEN_WORKERS": "2", "QUEEN_PUSH_SHARDS": "4"})
    assert settings.lane_shards == 4
    assert Settings(workers=4, db_pool_size=20, push_shards=5).pool_per_worker == 7


def test_a_worker_spools_in_a_directory_of_its_own(tmp_path) -> None:  # type: ignore[no-untyped-def]
    single = Settings(data_dir=tmp_path)
    assert single.spool_directory == tmp_path / "spool"
    worker = Settings(data_dir=tmp_path, workers=2, worker_index=2)
    assert worker.spool_root == tmp_path / "spool"
    assert worker.spool_directory == tmp_path / "spool" / "worker-2"


def test_a_flags_text_is_parsed_as_its_variables_would_be() -> None:
    assert Settings.from_env({}, workers="3", data_dir="/tmp/q").workers == 3
    assert Settings.from_env({}, data_dir="/tmp/q").data_dir == Path("/tmp/q")
    with pytest.raises(ConfigError, match="^--port='abc' is not an integer$"):
        Settings.from_env({"PORT": "7000"}, port="abc")


def test_variables_in_milliseconds_fill_fields_in_seconds() -> None:
    s = Settings.from_env({"RETENTION_INTERVAL": "5000", "STATS_INTERVAL_MS": "250"})
    assert (s.retention_interval_seconds, s.stats_interval_seconds) == (5.0, 0.25)


# Room for any pool size or shard count the bounds allow.
ROOMY = {"DB_POOL_SIZE": "1000", "QUEEN_PUSH_SHARDS": "1"}
BOUNDED = [(field.name, declared) for field, declared in declarations(Settings)
           if isinstance(declared.check, Bound) and declared.env]


@pytest.mark.parametrize(("field", "declared"), BOUNDED, ids=[name for name, _ in BOUNDED])
def test_a_value_outside_its_declared_range_is_refused_naming_the_variable(field, declared):
    bound = declared.check
    outside = bound.low if bound.strict else bound.low - 1
    with pytest.raises(ConfigError, match=f"^{declared.env}"):
        Settings.from_env({**ROOMY, declared.env: str(outside)})
    inside = bound.low + 1  # the lowest value allowed, or just above it
    assert getattr(Settings.from_env({**ROOMY, declared.env: str(inside)}), field) is not None


def test_the_rules_of_two_settings_name_both() -> None:
    with pytest.raises(ConfigError, match="^QUEEN_PUSH_SHARDS=8 must be below DB_POOL_SIZE=8$"):
        Settings.from_env({"QUEEN_PUSH_SHARDS": "8", "DB_POOL_SIZE": "8"})


@pytest.mark.parametrize("cls", [Settings, AuthSettings])
def test_a_default_the_docs_show_as_a_value_is_the_default_its_variable_gives(cls) -> None:
    shown = 0
    for field, declared in declarations(cls):
        text = shown_default(field, declared)
        if declared.env and declared.shown is None and re.fullmatch(r"`[^`]*`", text):
            assert declared.value_of(field, declared.env, text.strip("`")) == field.default, field.name
            shown += 1
    assert shown >= 5


def test_with_authentication_off_only_the_switches_are_read() -> None:
    off = AuthSettings.from_env({"JWT_PUBLIC_KEY": "/no/such/key.pem", "JWT_CLOCK_SKEW": "soon"})
    assert off == AuthSettings()
    on = AuthSettings.from_env({"JWT_ENABLED": "1", "JWT_SECRET": "s", "JWT_ROLE_ADMIN": "boss",
                                "JWT_JWKS_TIMEOUT_MS": "1500"})
    assert on.role_names == {"write-only": "write-only", "read-only": "read-only",
                             "read-write": "read-write", "admin": "boss"}
    assert on.jwks_timeout_seconds == 1.5
    with pytest.raises(ConfigError, match="^JWT_CLOCK_SKEW='soon' is not a number$"):
        AuthSettings.from_env({"JWT_ENABLED": "1", "JWT_SECRET": "s", "JWT_CLOCK_SKEW": "soon"})


def test_the_broker_listens_on_loopback_by_default() -> None:
    # Issue 25, point 1: elsewhere takes an explicit HOST or --host.
    assert Settings.from_env({}).host == "127.0.0.1"
    assert Settings.from_env({"HOST": "0.0.0.0"}).host == "0.0.0.0"


def test_cors_origins_are_origins_or_a_star() -> None:
    assert Settings.from_env({}).cors_origins == ()
    settings = Settings.from_env(
        {"QUEEN_CORS_ORIGINS": " https://App.example.com, http://localhost:3000 ,"})
    assert settings.cors_origins == ("https://app.example.com", "http://localhost:3000")
    assert Settings.from_env({"QUEEN_CORS_ORIGINS": "*"}).cors_origins == ("*",)
    for bad in ("https://app.example.com/", "app.example.com", "https://a.example/x", "null"):
        with pytest.raises(ConfigError, match="^QUEEN_CORS_ORIGINS: .* is not an origin"):
            Settings.from_env({"QUEEN_CORS_ORIGINS": bad})
