"""Broker configuration: one typed class, read from the environment and the command line."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from .auth import AuthSettings


class ConfigError(Exception):
    """The configuration cannot be used; the message names the variable and the cause."""


def default_data_dir() -> Path:
    """Per user; under root /var/lib/queen-trio, which the cluster's own user can reach
    without opening up root's home directory."""
    if os.geteuid() == 0 and not os.environ.get("XDG_DATA_HOME"):
        return Path("/var/lib/queen-trio")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share")
    return Path(base) / "queen-trio"


@attrs.frozen
class Settings:
    host: str = "0.0.0.0"
    port: int = 6632
    data_dir: Path = attrs.field(factory=default_data_dir)
    # None means: start the embedded PostgreSQL in data_dir.
    database_url: str | None = None
    db_pool_size: int = 20
    db_statement_timeout_ms: int = 30_000
    db_lock_timeout_ms: int = 10_000
    db_connection_timeout_ms: int = 2_000
    # Push lane: the backstop tick (never a linger) and the number of shard committers.
    fusion_hold_ms: float = 3.0
    push_shards: int = 4
    flush_idle_seconds: float = 10.0
    max_body_bytes: int = 16 * 1024 * 1024
    encryption_key: str | None = None
    partition_cleanup_days: int = 30
    partition_cleanup_interval_seconds: float = 3600.0
    retention_interval_seconds: float = 300.0
    # None: <data_dir>/spool.
    spool_dir: Path | None = None
    spool_records_per_file: int = 10_000
    retention_batch_size: int = 1000
    graceful_timeout_seconds: float = 10.0
    # Pops.
    default_batch_size: int = 1
    default_timeout_ms: int = 30_000
    default_subscription_mode: str = "all"
    pop_wait_initial_interval_ms: int = 100
    pop_wait_backoff_threshold: int = 3
    pop_wait_backoff_multiplier: float = 2.0
    pop_wait_max_interval_ms: int = 1000
    log_level: str = "warning"
    # None: authentication off (JWT_ENABLED unset).
    auth: AuthSettings | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, object] = {}

        def take(name: str, field: str, parse=str) -> None:  # type: ignore[no-untyped-def]
            raw = env.get(name)
            if raw is None or raw == "":
                return
            try:
                values[field] = parse(raw)
            except ValueError:
                raise ConfigError(f"{name}={raw!r} is not a valid {parse.__name__}") from None

        take("HOST", "host")
        take("PORT", "port", int)
        take("QUEEN_DATA_DIR", "data_dir", Path)
        take("DB_POOL_SIZE", "db_pool_size", int)
        take("DB_STATEMENT_TIMEOUT", "db_statement_timeout_ms", int)
        take("DB_LOCK_TIMEOUT", "db_lock_timeout_ms", int)
        take("DB_CONNECTION_TIMEOUT", "db_connection_timeout_ms", int)
        take("QUEEN_V2_FUSION_HOLD_MS", "fusion_hold_ms", float)
        take("QUEEN_PUSH_SHARDS", "push_shards", int)
        take("QUEEN_MAX_BODY_BYTES", "max_body_bytes", int)
        take("QUEEN_ENCRYPTION_KEY", "encryption_key")
        take("PARTITION_CLEANUP_DAYS", "partition_cleanup_days", int)
        take("RETENTION_INTERVAL", "retention_interval_seconds", milliseconds)
        take("RETENTION_BATCH_SIZE", "retention_batch_size", int)
        take("FILE_BUFFER_DIR", "spool_dir", Path)
        take("FILE_BUFFER_EVENTS_PER_FILE", "spool_records_per_file", int)
        take("LOG_LEVEL", "log_level")
        take("DEFAULT_BATCH_SIZE", "default_batch_size", int)
        take("DEFAULT_TIMEOUT", "default_timeout_ms", int)
        take("DEFAULT_SUBSCRIPTION_MODE", "default_subscription_mode")
        take("POP_WAIT_INITIAL_INTERVAL_MS", "pop_wait_initial_interval_ms", int)
        take("POP_WAIT_BACKOFF_THRESHOLD", "pop_wait_backoff_threshold", int)
        take("POP_WAIT_BACKOFF_MULTIPLIER", "pop_wait_backoff_multiplier", float)
        take("POP_WAIT_MAX_INTERVAL_MS", "pop_wait_max_interval_ms", int)
        values["database_url"] = database_url_from_env(env)
        from .auth import AuthSettings

        values["auth"] = AuthSettings.from_env(env)
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)  # type: ignore[arg-type]
        settings.check()
        return settings

    @property
    def spool_directory(self) -> Path:
        return self.spool_dir if self.spool_dir is not None else self.data_dir / "spool"

    def check(self) -> None:
        if not 0 < self.port < 65536:
            raise ConfigError(f"port {self.port} is out of range")
        if self.db_pool_size < 2:
            raise ConfigError("DB_POOL_SIZE must be at least 2")
        if self.push_shards < 1 or self.push_shards >= self.db_pool_size:
            raise ConfigError("QUEEN_PUSH_SHARDS must be at least 1 and below DB_POOL_SIZE")
        if self.fusion_hold_ms <= 0:
            raise ConfigError("QUEEN_V2_FUSION_HOLD_MS must be positive")
        if self.default_batch_size < 1 or self.default_timeout_ms < 0:
            raise ConfigError("DEFAULT_BATCH_SIZE must be >= 1 and DEFAULT_TIMEOUT >= 0")
        if self.default_subscription_mode not in ("", "all", "from_beginning", "new",
                                                  "new-only", "now"):
            raise ConfigError(f"DEFAULT_SUBSCRIPTION_MODE={self.default_subscription_mode!r} "
                              "is not one of all, new")
        if self.pop_wait_initial_interval_ms < 1 or self.pop_wait_max_interval_ms < 1:
            raise ConfigError("POP_WAIT_*_INTERVAL_MS must be positive")
        if self.retention_interval_seconds <= 0 or self.retention_batch_size < 1:
            raise ConfigError("RETENTION_INTERVAL and RETENTION_BATCH_SIZE must be positive")
        if self.max_body_bytes < 1024:
            raise ConfigError("QUEEN_MAX_BODY_BYTES must be at least 1024")


def milliseconds(text: str) -> float:
    """An integer number of milliseconds, as seconds."""
    return int(text) / 1000


def database_url_from_env(env: Mapping[str, str]) -> str | None:
    """DATABASE_URL wins; otherwise Queen's PG_* variables; otherwise None (embedded)."""
    if env.get("DATABASE_URL"):
        return env["DATABASE_URL"]
    names = ("PG_HOST", "PG_PORT", "PG_USER", "PG_PASSWORD", "PG_DB")
    if not any(env.get(n) for n in names):
        return None
    from urllib.parse import quote

    user = quote(env.get("PG_USER") or "postgres", safe="")
    password = quote(env.get("PG_PASSWORD") or "postgres", safe="")
    host = env.get("PG_HOST") or "localhost"
    port = env.get("PG_PORT") or "5432"
    db = quote(env.get("PG_DB") or "postgres", safe="")
    return f"postgresql://{user}:{password}@{host}:{port}/{db}"
