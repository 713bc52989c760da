"""Broker configuration: one typed class, read from the environment and the command line."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import attrs

from .errors import ConfigError

__all__ = ["ALGORITHMS", "ROLES", "AuthSettings", "ConfigError", "Settings", "parse_bool"]

# JWT algorithms the broker verifies; `auto` picks one by the token's header.
ALGORITHMS = ("HS256", "RS256", "ES256", "EdDSA")
# The access levels a token's role maps to (docs/decisions.md#auth).
ROLES = ("write-only", "read-only", "read-write", "admin")


_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("json", "text")


def parse_bool(name: str, raw: str) -> bool:
    """A boolean setting: true/false/1/0 in any case; anything else is refused, never off."""
    value = _BOOLEANS.get(raw.strip().lower())
    if value is None:
        raise ConfigError(f"{name}={raw!r} is not a boolean: use true, false, 1 or 0")
    return value


def env_bool(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    return parse_bool(name, raw)


def parse_log_level(name: str, raw: str) -> str:
    level = raw.strip().lower()
    if level not in LOG_LEVELS:
        raise ConfigError(f"{name}={raw!r} is not a log level: use {', '.join(LOG_LEVELS)}")
    return level


def parse_log_format(name: str, raw: str) -> str:
    form = raw.strip().lower()
    if form not in LOG_FORMATS:
        raise ConfigError(f"{name}={raw!r} is not a log format: use json or text")
    return form


def _usable(algorithm: str, pem: str) -> bool:
    import jwt  # here, not at import: every `queen-trio` command imports this module

    try:
        jwt.algorithms.get_default_algorithms()[algorithm].prepare_key(pem)
    except Exception:
        return False
    return True


@attrs.frozen
class AuthSettings:
    """JWT authentication (docs/decisions.md#auth; docs/self-hosting.md). Off by default."""

    enabled: bool = False
    algorithm: str = "HS256"
    secret: str | None = None
    public_key: str | None = None
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    clock_skew: float = 30.0
    allow_no_exp: bool = False
    roles_claim: str = "role"
    roles_array_claim: str = "roles"
    # Access level -> the role name that grants it (JWT_ROLE_*).
    role_names: Mapping[str, str] = attrs.field(factory=lambda: {k: k for k in ROLES})
    jwks_refresh_seconds: float = 3600.0
    jwks_timeout_seconds: float = 5.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AuthSettings:
        # Both booleans are checked even with authentication off: a typo never passes.
        enabled = env_bool(env, "JWT_ENABLED")
        allow_no_exp = env_bool(env, "JWT_ALLOW_NO_EXP")
        if not enabled:
            return cls()
        algorithm = env.get("JWT_ALGORITHM") or "HS256"
        if algorithm not in (*ALGORITHMS, "auto"):
            raise ConfigError(f"JWT_ALGORITHM={algorithm!r} is not one of "
                              f"{', '.join(ALGORITHMS)}, auto")
        public_key = env.get("JWT_PUBLIC_KEY") or None
        if public_key and not public_key.lstrip().startswith("-----BEGIN"):
            try:
                public_key = Path(public_key).read_text()
            except OSError as exc:
                raise ConfigError(f"JWT_PUBLIC_KEY is neither a PEM key nor a readable file: "
                                  f"{exc}") from None
        try:
            skew = float(env.get("JWT_CLOCK_SKEW") or 30)
            refresh = float(env.get("JWT_JWKS_REFRESH_INTERVAL") or 3600)
            timeout = float(env.get("JWT_JWKS_TIMEOUT_MS") or 5000) / 1000
        except ValueError as exc:
            raise ConfigError(f"a JWT_* number does not parse: {exc}") from None
        names = {
            "write-only": env.get("JWT_ROLE_WRITE_ONLY") or "write-only",
            "read-only": env.get("JWT_ROLE_READ_ONLY") or "read-only",
            "read-write": env.get("JWT_ROLE_READ_WRITE") or "read-write",
            "admin": env.get("JWT_ROLE_ADMIN") or "admin",
        }
        settings = cls(
            enabled=True, algorithm=algorithm, secret=env.get("JWT_SECRET") or None,
            public_key=public_key, jwks_url=env.get("JWT_JWKS_URL") or None,
            issuer=env.get("JWT_ISSUER") or None, audience=env.get("JWT_AUDIENCE") or None,
            clock_skew=skew, allow_no_exp=allow_no_exp,
            roles_claim=env.get("JWT_ROLES_CLAIM") or "role",
            roles_array_claim=env.get("JWT_ROLES_ARRAY_CLAIM") or "roles",
            role_names=names, jwks_refresh_seconds=refresh, jwks_timeout_seconds=timeout)
        settings.check()
        return settings

    def check(self) -> None:
        asymmetric = self.algorithm in ("RS256", "ES256", "EdDSA")
        if self.algorithm == "HS256" and not self.secret:
            raise ConfigError("JWT_ENABLED with HS256 needs JWT_SECRET")
        if asymmetric and not (self.public_key or self.jwks_url):
            raise ConfigError(f"JWT_ENABLED with {self.algorithm} needs JWT_PUBLIC_KEY or "
                              "JWT_JWKS_URL")
        if self.algorithm == "auto" and not (self.secret or self.public_key or self.jwks_url):
            raise ConfigError("JWT_ALGORITHM=auto needs JWT_SECRET, JWT_PUBLIC_KEY or "
                              "JWT_JWKS_URL")
        if self.public_key and not any(_usable(alg, self.public_key)
                                       for alg in ("RS256", "ES256", "EdDSA")):
            raise ConfigError("JWT_PUBLIC_KEY is not a PEM RSA, EC (P-256) or Ed25519 public key")
        if len(set(self.role_names.values())) != len(self.role_names):
            raise ConfigError("JWT_ROLE_* names must be distinct")


def default_data_dir() -> Path:
    """Per user; under root /var/lib/queen-trio, which the cluster's own user can reach
    without opening up root's home directory."""
    if os.geteuid() == 0 and not os.environ.get("XDG_DATA_HOME"):
        return Path("/var/lib/queen-trio")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share")
    return Path(base) / "queen-trio"


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask, lowered by a cgroup CPU quota
    (a container limited to 2 CPUs on a 32-core host has 2)."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            count = min(count, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, count)


# Worker processes beyond this gain little (one PostgreSQL behind them) and cost memory.
MAX_DEFAULT_WORKERS = 8
# Connections of the embedded cluster kept beyond the workers' budgets: migrations, the spool
# CLI, an operator's psql.
RESERVED_CONNECTIONS = 10
# ... and never fewer than PostgreSQL's own default: room for a second broker pointed at it.
MIN_EMBEDDED_CONNECTIONS = 100


def default_workers(cpus: int | None = None) -> int:
    """One worker on 2 usable CPUs or fewer (PostgreSQL needs the other), else one per CPU, up
    to MAX_DEFAULT_WORKERS."""
    cpus = usable_cpus() if cpus is None else cpus
    return 1 if cpus <= 2 else min(cpus, MAX_DEFAULT_WORKERS)


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
    # Push bytes waiting in memory for their commit; past it a push is refused (503).
    max_pending_bytes: int = 256 * 1024 * 1024
    # A request's line, headers and body must arrive within this of its first byte (408).
    request_read_timeout_ms: int = 30_000
    # Open HTTP connections; past it the broker stops accepting (clients wait in the backlog).
    max_connections: int = 4096
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
    log_level: str = "info"
    # None: text when stderr is a terminal, JSON otherwise.
    log_format: str | None = None
    # One line per request on the logger queen_trio.access, whatever log_level is.
    log_requests: bool = False
    # Worker processes behind one listening socket (1: a single process, no supervisor).
    workers: int = attrs.field(factory=default_workers)
    # Tests and benchmarks: worker K (1-based) also listens on worker_ports + K - 1.
    worker_ports: int | None = None
    # Tests and benchmarks: serve this ASGI app ("module:attr") instead of the broker.
    app: str | None = None
    # Set in a worker process: its number, 1 to workers (None: not a worker).
    worker_index: int | None = None
    # Operations: how often each process samples its figures, how long samples are kept, and
    # the name this process goes by in samples and metrics (default hostname:pid).
    stats_interval_seconds: float = 10.0
    metrics_retention_days: int = 7
    worker_id: str | None = None
    auth: AuthSettings = attrs.Factory(AuthSettings)
    # Where each setting came from ("PORT", "--port", ...), to name it in an error.
    sources: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Settings from the environment; `overrides` are command-line flags (None: not given),
        which win over their variables."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        sources: dict[str, str] = {}

        def take(name: str, field: str, parse=str) -> None:  # type: ignore[no-untyped-def]
            raw = env.get(name)
            sources.setdefault(field, name)
            if raw is None or raw == "":
                return
            try:
                values[field] = parse(raw)
            except ValueError:
                raise ConfigError(f"{name}={raw!r} is not a valid {parse.__name__}") from None

        def flag(field: str, name: str, parse=None) -> None:  # type: ignore[no-untyped-def]
            value = overrides.pop(field, None)
            if value is None:
                return
            values[field] = parse(name, value) if parse else value
            sources[field] = name

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
        take("QUEEN_MAX_PENDING_BYTES", "max_pending_bytes", int)
        take("QUEEN_REQUEST_READ_TIMEOUT", "request_read_timeout_ms", int)
        take("QUEEN_MAX_CONNECTIONS", "max_connections", int)
        take("QUEEN_ENCRYPTION_KEY", "encryption_key")
        take("PARTITION_CLEANUP_DAYS", "partition_cleanup_days", int)
        take("RETENTION_INTERVAL", "retention_interval_seconds", milliseconds)
        take("RETENTION_BATCH_SIZE", "retention_batch_size", int)
        take("FILE_BUFFER_DIR", "spool_dir", Path)
        take("FILE_BUFFER_EVENTS_PER_FILE", "spool_records_per_file", int)
        take("QUEEN_WORKERS", "workers", int)
        take("LOG_LEVEL", "log_level", lambda raw: parse_log_level("LOG_LEVEL", raw))
        take("LOG_FORMAT", "log_format", lambda raw: parse_log_format("LOG_FORMAT", raw))
        take("LOG_REQUESTS", "log_requests", lambda raw: parse_bool("LOG_REQUESTS", raw))
        take("DEFAULT_BATCH_SIZE", "default_batch_size", int)
        take("DEFAULT_TIMEOUT", "default_timeout_ms", int)
        take("DEFAULT_SUBSCRIPTION_MODE", "default_subscription_mode")
        take("POP_WAIT_INITIAL_INTERVAL_MS", "pop_wait_initial_interval_ms", int)
        take("POP_WAIT_BACKOFF_THRESHOLD", "pop_wait_backoff_threshold", int)
        take("POP_WAIT_BACKOFF_MULTIPLIER", "pop_wait_backoff_multiplier", float)
        take("POP_WAIT_MAX_INTERVAL_MS", "pop_wait_max_interval_ms", int)
        take("STATS_INTERVAL_MS", "stats_interval_seconds", milliseconds)
        take("METRICS_RETENTION_DAYS", "metrics_retention_days", int)
        take("QUEEN_WORKER_ID", "worker_id")
        url, sources["database_url"] = database_url_from_env(env), database_url_source(env)
        values["database_url"] = url
        values["auth"] = AuthSettings.from_env(env)
        flag("host", "--host")
        flag("port", "--port")
        flag("data_dir", "--data-dir")
        flag("database_url", "--database-url")
        flag("log_level", "--log-level", parse_log_level)
        flag("log_requests", "--access-log")
        flag("workers", "--workers")
        flag("worker_ports", "--worker-ports")
        flag("app", "--app")
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values, sources=sources)  # type: ignore[arg-type]
        settings.check()
        return settings

    def source(self, field: str) -> str:
        """The variable or flag a setting came from, for error messages."""
        return self.sources.get(field, field)

    @property
    def uses_data_dir(self) -> bool:
        """Whether the data directory holds this broker's cluster or spool (then one broker
        per directory: storage/datadir.py)."""
        return self.database_url is None or self.spool_dir is None

    @property
    def call_deadline_seconds(self) -> float:
        """How long a shielded database call (a claim, a commit, a release) may take before
        the broker gives up on it. The server's statement timeout fires first; this is the
        backstop for a server that stopped answering."""
        return (self.db_statement_timeout_ms + self.db_connection_timeout_ms) / 1000 + 1

    @property
    def spool_root(self) -> Path:
        """FILE_BUFFER_DIR, or <data_dir>/spool: a single process spools here, worker K in
        its `worker-K` directory."""
        return self.spool_dir if self.spool_dir is not None else self.data_dir / "spool"

    @property
    def spool_directory(self) -> Path:
        """This process's own spool directory."""
        if self.worker_index is None:
            return self.spool_root
        return self.spool_root / f"worker-{self.worker_index}"

    @property
    def pool_per_worker(self) -> int:
        """Each worker's share of DB_POOL_SIZE, never below what its push shards need."""
        if self.workers == 1:
            return self.db_pool_size
        return max(self.db_pool_size // self.workers, self.push_shards + 2)

    @property
    def embedded_max_connections(self) -> int:
        """The embedded cluster's max_connections: every worker's pool and LISTEN connection,
        and a reserve; at least PostgreSQL's default."""
        return max(self.workers * (self.pool_per_worker + 1) + RESERVED_CONNECTIONS,
                   MIN_EMBEDDED_CONNECTIONS)

    def check(self) -> None:
        if not 0 < self.port < 65536:
            raise ConfigError(f"{self.source('port')}={self.port} is out of range (1 to 65535)")
        if self.database_url is not None:
            check_database_url(self.source("database_url"), self.database_url)
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
        if self.stats_interval_seconds <= 0 or self.metrics_retention_days < 1:
            raise ConfigError("STATS_INTERVAL_MS must be positive and METRICS_RETENTION_DAYS "
                              "at least 1")
        if self.max_body_bytes < 1024:
            raise ConfigError("QUEEN_MAX_BODY_BYTES must be at least 1024")
        if not 1 <= self.workers <= 256:
            raise ConfigError(f"{self.source('workers')}={self.workers} is out of range "
                              "(1 to 256)")
        if self.worker_ports is not None and not (
                0 < self.worker_ports and self.worker_ports + self.workers - 1 < 65536):
            raise ConfigError(f"--worker-ports {self.worker_ports} with {self.workers} workers "
                              "runs out of ports (1 to 65535)")
        if self.app is not None and ":" not in self.app:
            raise ConfigError(f"--app {self.app!r} is not module:attribute")
        if self.max_pending_bytes < 1:
            raise ConfigError("QUEEN_MAX_PENDING_BYTES must be positive")
        if self.request_read_timeout_ms < 1 or self.max_connections < 1:
            raise ConfigError("QUEEN_REQUEST_READ_TIMEOUT and QUEEN_MAX_CONNECTIONS must be "
                              "positive")


def milliseconds(text: str) -> float:
    """An integer number of milliseconds, as seconds."""
    return int(text) / 1000


_PG_VARIABLES = ("PG_HOST", "PG_PORT", "PG_USER", "PG_PASSWORD", "PG_DB")


def database_url_source(env: Mapping[str, str]) -> str:
    if env.get("DATABASE_URL") or not any(env.get(n) for n in _PG_VARIABLES):
        return "DATABASE_URL"
    return "PG_HOST/PG_PORT/PG_USER/PG_PASSWORD/PG_DB"


def database_url_from_env(env: Mapping[str, str]) -> str | None:
    """DATABASE_URL wins; otherwise Queen's PG_* variables; otherwise None (embedded)."""
    if env.get("DATABASE_URL"):
        return env["DATABASE_URL"]
    if not any(env.get(n) for n in _PG_VARIABLES):
        return None
    port = env.get("PG_PORT") or "5432"
    if not port.strip().isdigit():
        raise ConfigError(f"PG_PORT={port!r} is not a port number")
    user = quote(env.get("PG_USER") or "postgres", safe="")
    password = quote(env.get("PG_PASSWORD") or "postgres", safe="")
    host = env.get("PG_HOST") or "localhost"
    db = quote(env.get("PG_DB") or "postgres", safe="")
    return f"postgresql://{user}:{password}@{host}:{port.strip()}/{db}"


def redact_url(url: str) -> str:
    """The URL with its password replaced by ***, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("@", 1)[-1] if "@" in url else url
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def check_database_url(source: str, url: str) -> None:
    """A URL the broker can connect with: postgresql:// or postgres://, a host, a numeric port.
    An unreachable or unresolvable host is not refused here: the broker starts and spools."""
    shown = f"{source}={redact_url(url)!r}"
    try:
        parts = urlsplit(url)
        if "," not in parts.netloc:  # a multi-host DSN lists ports per host
            parts.port  # noqa: B018 -- raises ValueError on a port that is not a number
    except ValueError as exc:
        raise ConfigError(f"{shown} does not parse as a URL: {exc}") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigError(f"{shown} is not a PostgreSQL URL: it must start with postgresql:// "
                          "or postgres://")
    if not parts.netloc and "host=" not in parts.query:
        raise ConfigError(f"{shown} names no host")
