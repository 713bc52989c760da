"""Broker configuration: one typed class, read from the environment and the command line.

Every setting is declared once, as a field of `Settings` (or `AuthSettings`) made by
`setting(...)`: its default, its environment variable and `serve` flag, how their text is
parsed, the range its value must keep, and its line of documentation. `Settings.from_env`,
`serve`'s flags, `Settings.check` and the settings tables of docs/operations.md and
docs/self-hosting.md (`markdown_table`) are all read from those declarations.
"""

from __future__ import annotations

import math
import os
import re
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import attrs

from .errors import ConfigError

__all__ = ["ALGORITHMS", "ROLES", "AuthSettings", "ConfigError", "Setting", "Settings",
           "declarations", "markdown_table", "parse_bool", "plain", "setting", "with_tables"]

# JWT algorithms the broker verifies; `auto` picks one by the token's header.
ALGORITHMS = ("HS256", "RS256", "ES256", "EdDSA")
# The access levels a token's role maps to (docs/decisions.md#auth), and the variable naming the
# role that grants each.
ROLES = ("write-only", "read-only", "read-write", "admin")
ROLE_VARIABLES = {level: "JWT_ROLE_" + level.upper().replace("-", "_") for level in ROLES}

_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("json", "text")
SUBSCRIPTION_MODES = ("all", "new", "from_beginning", "new-only", "now")


# -- parsers: (the variable or flag, its text) -> the value, or ConfigError naming both -------

Parser = Callable[[str, str], Any]


def parse_text(name: str, raw: str) -> str:
    return raw


def parse_path(name: str, raw: str) -> Path:
    return Path(raw)


def parse_int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None


def parse_float(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None


def parse_bool(name: str, raw: str) -> bool:
    """A boolean setting: true/false/1/0 in any case; anything else is refused, never off."""
    value = _BOOLEANS.get(raw.strip().lower())
    if value is None:
        raise ConfigError(f"{name}={raw!r} is not a boolean: use true, false, 1 or 0")
    return value


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


_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/?#\s]+")


def parse_origins(name: str, raw: str) -> tuple[str, ...]:
    """Web origins, comma-separated: `scheme://host[:port]` as a browser sends it in `Origin`
    (no path, no trailing slash, which would never match), or `*`."""
    origins = tuple(part.strip().lower() for part in raw.split(",") if part.strip())
    for origin in origins:
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise ConfigError(f"{name}: {origin!r} is not an origin: use scheme://host[:port] "
                              "with no path (https://app.example.com), or *")
    return origins


def parse_public_key(name: str, raw: str) -> str:
    """A PEM key given as itself, or as the path of a file holding it (read once, here)."""
    if raw.lstrip().startswith("-----BEGIN"):
        return raw
    try:
        return Path(raw).read_text()
    except OSError as exc:
        raise ConfigError(f"{name} is neither a PEM key nor a readable file: {exc}") from None


# The parser of a setting of each type, unless its declaration names another.
PARSERS: dict[Any, Parser] = {str: parse_text, int: parse_int, float: parse_float,
                              bool: parse_bool, Path: parse_path}


# -- checks: (the variable or flag, the value) -> None, or ConfigError naming both ------------

Check = Callable[[str, Any], None]


@attrs.frozen
class Bound:
    """A number's range: from `low` (or above it, when `strict`) up to `high` (or without a
    limit). Its words end the setting's line in the docs."""

    low: int
    high: int | None = None
    strict: bool = False

    def __str__(self) -> str:
        if self.high is not None:
            return f"from {self.low} to {self.high}"
        return "positive" if self.strict else f"at least {self.low}"

    def __call__(self, name: str, value: float) -> None:
        if self.high is not None and not self.low <= value <= self.high:
            raise ConfigError(f"{name}={value} is out of range ({self.low} to {self.high})")
        if value < self.low or (self.strict and value == self.low):
            raise ConfigError(f"{name} must be {self}")


def between(low: int, high: int) -> Bound:
    return Bound(low, high)


def at_least(low: int) -> Bound:
    return Bound(low)


POSITIVE = Bound(0, strict=True)


def one_of(*choices: str) -> Check:
    def check(name: str, value: str) -> None:
        if value not in choices:
            raise ConfigError(f"{name}={value!r} is not one of {', '.join(choices)}")
    return check


def check_module_attribute(name: str, value: str) -> None:
    if ":" not in value:
        raise ConfigError(f"{name}={value!r} is not module:attribute")


# -- the declaration ------------------------------------------------------------------------

_DECLARED = "queen_trio.setting"


@attrs.frozen
class Setting:
    """One setting, declared once: where it is read, how its text is parsed, what its value
    must be, and its line of documentation (markdown, one line of the docs' table)."""

    doc: str
    # The environment variable; none for a setting of the code, or of a flag only.
    env: str | None = None
    # The `serve` flag, which wins over the variable.
    flag: str | None = None
    metavar: str | None = None
    # None: the parser of the field's type (`PARSERS`).
    parse: Parser | None = None
    # The variable counts milliseconds; the field holds seconds.
    milliseconds: bool = False
    check: Check | None = None
    # The default as the docs and --help show it, where the value alone would not say it.
    shown: str | None = None
    # A setting read from several variables: the environment -> (its value or None, the
    # variables it came from); `also` names them for the docs.
    read: Callable[[Mapping[str, str]], tuple[Any, str]] | None = None
    also: tuple[str, ...] = ()

    @property
    def fixed(self) -> bool:
        """Neither a variable nor a flag sets it (the code, or a test broker, does)."""
        return not (self.env or self.also or self.flag)

    @property
    def usage(self) -> str:
        """The flag as it is typed: `--port PORT`."""
        return " ".join(part for part in (self.flag, self.metavar) if part)

    def name(self, field: str) -> str:
        """What a message calls the setting when no source is known."""
        return self.env or self.flag or field

    def parser(self, field: attrs.Attribute[Any]) -> Parser:
        """The declared parser, else the one of the field's type (None aside)."""
        if self.parse is not None:
            return self.parse
        kinds = [kind for kind in typing.get_args(field.type) or (field.type,)
                 if kind is not type(None)]
        return PARSERS[kinds[0]]

    def value_of(self, field: attrs.Attribute[Any], name: str, raw: str) -> Any:
        """The text of a variable or a flag as the field's value."""
        value = self.parser(field)(name, raw)
        return value / 1000 if self.milliseconds else value


def setting(default: Any = attrs.NOTHING, *, factory: Callable[[], Any] | None = None,
            **declared: Any) -> Any:
    """A field of a settings class with its declaration (`declared`: `Setting`'s fields)."""
    metadata = {_DECLARED: Setting(**declared)}
    if factory is not None:
        return attrs.field(factory=factory, metadata=metadata)
    return attrs.field(default=default, metadata=metadata)


def declarations(cls: type) -> Iterator[tuple[attrs.Attribute[Any], Setting]]:
    """The declared settings of a settings class, in field order, with their types."""
    for field in attrs.fields(attrs.resolve_types(cls)):
        if _DECLARED in field.metadata:
            yield field, field.metadata[_DECLARED]


def declaration_of(cls: type, name: str) -> tuple[attrs.Attribute[Any], Setting] | None:
    """One field and its declaration (None: the field is not a setting)."""
    return next(((f, d) for f, d in declarations(cls) if f.name == name), None)


def read_env(cls: type, env: Mapping[str, str], only: tuple[str, ...] | None = None
             ) -> tuple[dict[str, Any], dict[str, str]]:
    """The values the environment gives (a variable set to "" counts as unset), and the
    variable each setting is read from."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field, declared in declarations(cls):
        if only is not None and field.name not in only:
            continue
        if declared.read is not None:
            value, sources[field.name] = declared.read(env)
        elif declared.env is not None:
            sources[field.name] = declared.env
            raw = env.get(declared.env)
            value = declared.value_of(field, declared.env, raw) if raw else None
        else:
            continue
        if value is not None:
            values[field.name] = value
    return values, sources


def check_each(settings: Any, sources: Mapping[str, str]) -> None:
    """Every value that is set, against its own declaration's check."""
    for field, declared in declarations(type(settings)):
        value = getattr(settings, field.name)
        if declared.check is not None and value is not None:
            declared.check(sources.get(field.name) or declared.name(field.name), value)


def shown_default(field: attrs.Attribute[Any], declared: Setting) -> str:
    """A setting's default in markdown, in its variable's units."""
    if declared.shown is not None:
        return declared.shown
    default = field.default
    if hasattr(default, "factory"):  # an attrs.Factory: computed at start
        raise TypeError(f"{field.name}: say how its default is shown (shown=...)")
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "on" if default else "off"
    if declared.milliseconds:
        default = round(default * 1000)
    return f"`{default}`"


def markdown_table(cls: type) -> str:
    """The docs' table of a settings class: each setting's variables, its flag (a column only
    where some setting has one), its default, and its line ended by its range. Settings of the
    code alone come last."""
    flags = any(declared.flag for _, declared in declarations(cls))
    head = ["Variable", *(["Flag"] if flags else []), "Default", "Meaning"]
    lines = ["|" + "|".join(f" {cell} " for cell in head) + "|", "|---" * len(head) + "|"]
    for field, declared in sorted(declarations(cls), key=lambda each: each[1].fixed):
        names = ", ".join(f"`{n}`" for n in (declared.env, *declared.also) if n)
        flag = [f"`{declared.usage}`" if declared.flag else ""] if flags else []
        bound = f"; must be {declared.check}" if isinstance(declared.check, Bound) else ""
        row = [names or ("none: fixed in code" if declared.fixed else ""), *flag,
               shown_default(field, declared), declared.doc + bound]
        lines.append("|" + "|".join(f" {cell} " if cell else " " for cell in row) + "|")
    return "".join(line + "\n" for line in lines)


def plain(markdown: str) -> str:
    """A line of the docs as plain text, for --help: no backticks, links as their words, and
    no "(see [a section](#...))", which means nothing there."""
    text = re.sub(r" \(see \[[^]]*\]\(#[^)]*\)\)", "", markdown)
    return re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", text).replace("`", "")


# -- JWT authentication ---------------------------------------------------------------------

def _usable(algorithm: str, pem: str) -> bool:
    import jwt  # here, not at import: every `queen-trio` command imports this module

    try:
        jwt.algorithms.get_default_algorithms()[algorithm].prepare_key(pem)
    except Exception:
        return False
    return True


def read_role_names(env: Mapping[str, str]) -> tuple[dict[str, str], str]:
    return {level: env.get(name) or level for level, name in ROLE_VARIABLES.items()}, "JWT_ROLE_*"


@attrs.frozen
class AuthSettings:
    """JWT authentication (docs/decisions.md#auth; docs/self-hosting.md). Off by default."""

    enabled: bool = setting(
        False, env="JWT_ENABLED",
        doc="`true` or `1` (any case) turns authentication on; `false`/`0` leave it off; "
            "anything else exits 2")
    algorithm: str = setting(
        "HS256", env="JWT_ALGORITHM", check=one_of(*ALGORITHMS, "auto"),
        doc="`HS256`, `RS256`, `ES256`, `EdDSA` or `auto`. A token whose header `alg` differs "
            "is refused; `auto` accepts any of the four")
    secret: str | None = setting(
        None, env="JWT_SECRET",
        doc="the HS256 shared secret, used as the UTF-8 bytes of the string")
    public_key: str | None = setting(
        None, env="JWT_PUBLIC_KEY", parse=parse_public_key,
        doc="a PEM public key (RSA, EC P-256 or Ed25519), given either as the PEM text itself "
            "(starting with `-----BEGIN`) or as the path of a PEM file, read once at start")
    jwks_url: str | None = setting(
        None, env="JWT_JWKS_URL",
        doc="a JWKS document: an `http://` or `https://` URL, or a file path (a `file://` "
            "prefix is allowed). It is read in a worker thread, off the event loop: once at "
            "start, again when a token names an unknown `kid`, and again on the first request "
            "after the cached copy is older than `JWT_JWKS_REFRESH_INTERVAL`")
    issuer: str | None = setting(None, env="JWT_ISSUER", doc="when set, `iss` must equal it")
    audience: str | None = setting(
        None, env="JWT_AUDIENCE",
        doc="when set, `aud` must be it or contain it. **When unset, a token that carries `aud` "
            "is refused** (PyJWT's rule)")
    clock_skew: float = setting(
        30.0, env="JWT_CLOCK_SKEW",
        doc="seconds of leeway for `exp`, `nbf` and `iat`")
    allow_no_exp: bool = setting(
        False, env="JWT_ALLOW_NO_EXP",
        doc="`true`/`1`: accept tokens without `exp`. `exp` is still checked when present. "
            "Anything but true/false/1/0 exits 2")
    roles_claim: str = setting(
        "role", env="JWT_ROLES_CLAIM", doc="the claim holding one role, as a string")
    roles_array_claim: str = setting(
        "roles", env="JWT_ROLES_ARRAY_CLAIM",
        doc="the claim holding a list of roles. A token's roles are the union of both claims")
    # Access level -> the role name that grants it.
    role_names: Mapping[str, str] = setting(
        factory=lambda: {k: k for k in ROLES}, read=read_role_names,
        also=tuple(ROLE_VARIABLES.values()), shown="the level's own name",
        doc="the role value that grants each access level: write-only, read-only, read-write "
            "and admin, in that order")
    jwks_refresh_seconds: float = setting(
        3600.0, env="JWT_JWKS_REFRESH_INTERVAL",
        doc="seconds before the cached JWKS counts as stale")
    jwks_timeout_seconds: float = setting(
        5.0, env="JWT_JWKS_TIMEOUT_MS", milliseconds=True,
        doc="timeout of a JWKS fetch over HTTP, in ms")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AuthSettings:
        # With authentication off only the two booleans are read, so that a typo in them never
        # passes; nothing else is (a key file, say).
        switches, _ = read_env(cls, env, only=("enabled", "allow_no_exp"))
        if not switches.get("enabled"):
            return cls()
        settings = cls(**read_env(cls, env)[0])
        settings.check()
        return settings

    def check(self) -> None:
        check_each(self, {})
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


# -- defaults that depend on the machine ----------------------------------------------------

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
# Push shard committers of a whole broker, split over its workers by default. A committer
# bundles whatever is pending when its transaction starts, so more of them make smaller
# bundles: more commits for the same messages. On 2 CPUs, 2 in all pushed 11 to 34 % more
# than 4 in all, at 1 and at 2 workers (docs/performance.md, "The push lane's shards").
PUSH_SHARDS_PER_BROKER = 2
# Connections of the embedded cluster kept beyond the workers' budgets: migrations, the spool
# CLI, an operator's psql.
RESERVED_CONNECTIONS = 10
# ... and never fewer than PostgreSQL's own default: room for a second broker pointed at it.
MIN_EMBEDDED_CONNECTIONS = 100


def default_workers(cpus: int | None = None) -> int:
    """One worker per usable CPU, up to MAX_DEFAULT_WORKERS (docs/operations.md, Workers).
    Two CPUs get two workers: one broker process is the limit of every case there, PostgreSQL
    leaves most of a core free, and the second worker takes it."""
    cpus = usable_cpus() if cpus is None else cpus
    return max(1, min(cpus, MAX_DEFAULT_WORKERS))


# -- the database URL: DATABASE_URL, or Queen's PG_* variables ------------------------------

_PG_VARIABLES = ("PG_HOST", "PG_PORT", "PG_USER", "PG_PASSWORD", "PG_DB")


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


def read_database_url(env: Mapping[str, str]) -> tuple[str | None, str]:
    url = database_url_from_env(env)
    if env.get("DATABASE_URL") or url is None:
        return url, "DATABASE_URL"
    return url, "/".join(_PG_VARIABLES)


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


# -- the broker's settings ------------------------------------------------------------------

@attrs.frozen
class Settings:
    """The broker's settings. Each is declared once, here: its default, variable, flag,
    parser (by its type unless named), range and line in docs/operations.md."""

    # Listening, the data directory and the database.
    host: str = setting(
        "127.0.0.1", env="HOST", flag="--host", metavar="ADDRESS",
        doc="listen address: loopback unless told otherwise, as PostgreSQL and Redis do. "
            "`0.0.0.0` (or a host's address) opens the port to the network; with "
            "authentication off the broker then warns at start "
            "([self-hosting.md](self-hosting.md#exposure-limits-and-overload))")
    port: int = setting(
        6632, env="PORT", flag="--port", metavar="PORT",
        check=between(1, 65535), doc="listen port")
    data_dir: Path = setting(
        factory=default_data_dir, env="QUEEN_DATA_DIR", flag="--data-dir", metavar="DIR",
        shown="`$XDG_DATA_HOME/queen-trio`; without it `~/.local/share/queen-trio`, as root "
              "`/var/lib/queen-trio`",
        doc="directory of the embedded PostgreSQL (unless a database URL is given) and of the "
            "default spool directory")
    database_url: str | None = setting(
        None, env="DATABASE_URL", also=_PG_VARIABLES, read=read_database_url,
        flag="--database-url", metavar="URL", check=check_database_url,
        shown="unset: the embedded PostgreSQL",
        doc="external PostgreSQL, `postgresql://...`; the `PG_*` variables build one when "
            "`DATABASE_URL` is unset")
    require_database: bool = setting(
        False, env="QUEEN_REQUIRE_DATABASE", flag="--require-database",
        doc="exit 2 at start, with the line that names the host, the port and the error, when "
            "the database cannot be reached. Off: the broker starts anyway, spools pushes and "
            "says so every 30 s until the database answers")
    db_pool_size: int = setting(
        20, env="DB_POOL_SIZE", check=at_least(2),
        doc="maximum connections in the pool, which opens them on demand (it keeps none open "
            "at start)")
    db_statement_timeout_ms: int = setting(
        30_000, env="DB_STATEMENT_TIMEOUT",
        doc="`statement_timeout` of pool connections, in ms")
    db_lock_timeout_ms: int = setting(
        10_000, env="DB_LOCK_TIMEOUT",
        doc="`lock_timeout` of pool connections, in ms")
    db_connection_timeout_ms: int = setting(
        2_000, env="DB_CONNECTION_TIMEOUT",
        doc="timeout for opening a pool connection, in ms")
    # KV and locks (docs/kv-and-locks.md).
    kv_pool_size: int = setting(
        4, env="QUEEN_KV_POOL_SIZE", check=at_least(1),
        doc="connections of each worker's KV pool, which serves `/api/v1/kv`, `/api/v1/locks` "
            "and the KV pages, apart from the message path's pool; calls beyond it wait their "
            "turn first come, first served, and answer 503 `kv_unavailable` after "
            "`DB_CONNECTION_TIMEOUT`")
    kv_statement_timeout_ms: int = setting(
        5_000, env="QUEEN_KV_STATEMENT_TIMEOUT", check=POSITIVE,
        doc="`statement_timeout` of the KV pool, in ms: well under the clients' 30 s, so a KV "
            "call never times out on the client while it commits on the broker")
    kv_sweep_interval_seconds: float = setting(
        10.0, env="QUEEN_KV_SWEEP_INTERVAL", check=POSITIVE,
        doc="seconds between passes of the KV expiry sweeper (elected: one broker at a time); "
            "correctness never depends on it, an expired key is absent either way")
    # The push lane.
    fusion_hold_ms: float = setting(
        3.0, env="QUEEN_V2_FUSION_HOLD_MS", check=POSITIVE,
        doc="the shard committers' backstop tick, in ms. It is a periodic re-check only: a push "
            "never waits for it")
    push_shards: int | None = setting(
        None, env="QUEEN_PUSH_SHARDS", check=at_least(1),
        shown=f"{PUSH_SHARDS_PER_BROKER} ÷ workers, at least 1",
        doc="shard committers in each worker's push lane, each with at most one transaction in "
            "flight; fewer than `DB_POOL_SIZE` (see [Workers](#workers))")
    flush_idle_seconds: float = setting(
        10.0, doc="seconds without pushes before a partition's flush task exits (it comes back "
                  "on the next push)")
    # Requests and connections.
    max_body_bytes: int = setting(
        16 * 1024 * 1024, env="QUEEN_MAX_BODY_BYTES", check=at_least(1024),
        doc="larger request bodies get 413")
    max_pending_bytes: int = setting(
        256 * 1024 * 1024, env="QUEEN_MAX_PENDING_BYTES", check=POSITIVE,
        doc="push bytes the broker holds in memory while they wait for their commit; a push "
            "that would pass it stores nothing and answers 503 with `Retry-After: 1` (see "
            "[Limits and overload](#limits-and-overload))")
    # Ephemeral queues (docs/ephemeral.md).
    ephemeral_max_bytes: int = setting(
        256 * 1024 * 1024, env="QUEEN_EPHEMERAL_MAX_BYTES", check=POSITIVE,
        doc="the RAM the ephemeral queues of the owning process may hold (payloads plus a "
            "small cell each); a push past it answers 503 `ephemeral_unavailable`")
    ephemeral_heartbeat_seconds: float = setting(
        1.0, env="QUEEN_EPHEMERAL_HEARTBEAT_MS", parse=parse_int, milliseconds=True,
        check=POSITIVE,
        doc="how often each process writes its membership heartbeat and tries the ephemeral "
            "owner's lock, in ms: a dead owner's rings move within about this long")
    peer_host: str = setting(
        "127.0.0.1", env="QUEEN_PEER_HOST",
        doc="where each broker process listens for requests its peers relay to it (the "
            "ephemeral owner); loopback serves the workers and brokers of one host")
    peer_port: int = setting(
        0, env="QUEEN_PEER_PORT", check=between(0, 65535),
        doc="the peer listener's port; `0` picks a free one. With `--workers N`, worker K "
            "listens on this port plus K - 1")
    advertise_address: str | None = setting(
        None, env="QUEEN_ADVERTISE_ADDRESS", shown="`QUEEN_PEER_HOST`",
        doc="the host name or address other broker processes reach this one's peer "
            "listener at (set it when brokers run on several hosts)")
    request_read_timeout_ms: int = setting(
        30_000, env="QUEEN_REQUEST_READ_TIMEOUT", check=POSITIVE,
        doc="ms within which a request's line, headers and whole body must arrive, counted "
            "from its first byte; past it the broker answers 408 `{\"error\"}` and closes the "
            "connection. Only the reading is timed: a long poll may wait longer")
    max_connections: int = setting(
        4096, env="QUEEN_MAX_CONNECTIONS", check=POSITIVE,
        doc="open HTTP connections; past it the broker stops accepting, so new clients wait in "
            "the listen backlog (1024), and logs `connection limit reached` at most once a "
            "minute")
    cors_origins: tuple[str, ...] = setting(
        (), env="QUEEN_CORS_ORIGINS", parse=parse_origins, shown="unset: no origin",
        doc="web origins whose pages may call the API from a browser, comma-separated "
            "(`https://app.example.com,http://localhost:3000`), or `*` for any. Only they get "
            "the CORS headers and an `OPTIONS` answer that allows them; a browser's request "
            "from any other origin is refused (403). The dashboard is same-origin and needs "
            "none")
    encryption_key: str | None = setting(
        None, env="QUEEN_ENCRYPTION_KEY",
        doc="AES-256-GCM key, 64 hex characters. A malformed key logs one warning at start; a "
            "missing one logs nothing. Either way encryption is off, and queues with "
            "`encryptionEnabled` store plaintext, with one warning per queue. See "
            "[self-hosting.md](self-hosting.md#encryption-at-rest)")
    auth: AuthSettings = setting(
        factory=AuthSettings, read=lambda env: (AuthSettings.from_env(env), "JWT_*"),
        also=("JWT_ENABLED", "JWT_*"), shown="off",
        doc="JWT authentication: every variable, the access levels and worked examples are in "
            "[self-hosting.md](self-hosting.md#authentication-jwt)")
    # Maintenance and the spool.
    partition_cleanup_days: int = setting(
        30, env="PARTITION_CLEANUP_DAYS",
        doc="idle days before an empty partition is deleted (see "
            "[Partition reclaim](#partition-reclaim))")
    partition_cleanup_interval_seconds: float = setting(
        3600.0, doc="seconds between partition reclaim passes (the first runs at start)")
    retention_interval_seconds: float = setting(
        300.0, env="RETENTION_INTERVAL", parse=parse_int, milliseconds=True, check=POSITIVE,
        doc="time between retention passes, in ms (an integer; the first pass runs at start); "
            "see [Retention](#retention)")
    retention_batch_size: int = setting(
        1000, env="RETENTION_BATCH_SIZE", check=POSITIVE,
        doc="the most rows of each kind one retention pass deletes or moves")
    timer_claim_lease_seconds: float = setting(
        10.0, env="QUEEN_TIMER_CLAIM_LEASE_MS", parse=parse_int, milliseconds=True,
        check=POSITIVE,
        doc="how long a broker holds the timers it claimed to fire them, in ms; a broker that "
            "dies mid-fire leaves them to another once it lapses (docs/timers.md)")
    timer_batch_size: int = setting(
        256, env="QUEEN_TIMER_BATCH_SIZE", check=POSITIVE,
        doc="the most due timers one claim takes and one transaction fires")
    spool_dir: Path | None = setting(
        None, env="FILE_BUFFER_DIR", shown="`<data-dir>/spool`",
        doc="the spool directory, one per broker "
            "([self-hosting.md](self-hosting.md#the-spool-pushes-during-a-database-outage))")
    spool_records_per_file: int = setting(
        10_000, env="FILE_BUFFER_EVENTS_PER_FILE",
        doc="records per spool file before a new one is started")
    graceful_timeout_seconds: float = setting(
        10.0, env="QUEEN_GRACEFUL_TIMEOUT_MS", parse=parse_int, milliseconds=True,
        check=POSITIVE,
        doc="how long a shutdown gives the requests in flight, in ms (hypercorn's "
            "`graceful_timeout`); a stop with none open does not wait for it")
    # Pops.
    default_batch_size: int = setting(
        1, env="DEFAULT_BATCH_SIZE", check=at_least(1),
        doc="a pop's `batch` when the request has none (and no `autopilot`)")
    default_timeout_ms: int = setting(
        30_000, env="DEFAULT_TIMEOUT", check=at_least(0),
        doc="a long poll's `timeout` in ms when the request has none")
    default_subscription_mode: str = setting(
        "all", env="DEFAULT_SUBSCRIPTION_MODE", check=one_of(*SUBSCRIPTION_MODES),
        doc="a new group's start when the pop says nothing: `all` or `new` (also "
            "`from_beginning`, `new-only`, `now`)")
    pop_wait_initial_interval_ms: int = setting(
        100, env="POP_WAIT_INITIAL_INTERVAL_MS", check=POSITIVE,
        doc="a parked long poll re-checks every this many ms for its first checks; wake-ups "
            "(local commits, NOTIFY) come on top")
    pop_wait_backoff_threshold: int = setting(
        3, env="POP_WAIT_BACKOFF_THRESHOLD",
        doc="checks at the initial interval before the interval grows")
    pop_wait_backoff_multiplier: float = setting(
        2.0, env="POP_WAIT_BACKOFF_MULTIPLIER",
        doc="past the threshold, the k-th check comes `initial × k × multiplier` ms after the "
            "last")
    pop_wait_max_interval_ms: int = setting(
        1000, env="POP_WAIT_MAX_INTERVAL_MS", check=POSITIVE,
        doc="the longest interval between a parked long poll's checks, in ms")
    # Logging.
    log_level: str = setting(
        "info", env="LOG_LEVEL", flag="--log-level", metavar="LEVEL", parse=parse_log_level,
        doc="`debug`, `info`, `warning`, `error` or `critical`, any case; anything else exits 2 "
            "(see [Logging](#logging))")
    log_format: str | None = setting(
        None, env="LOG_FORMAT", parse=parse_log_format,
        shown="text when stderr is a terminal, JSON otherwise", doc="`json` or `text`")
    log_requests: bool = setting(
        False, env="LOG_REQUESTS", flag="--access-log",
        doc="one line per request on the logger `queen_trio.access`, whatever `LOG_LEVEL` is")
    workers: int = setting(
        factory=default_workers, env="QUEEN_WORKERS", flag="--workers", metavar="N",
        check=between(1, 256),
        shown=f"one per usable CPU, at most {MAX_DEFAULT_WORKERS}",
        doc="broker processes sharing the port, under one supervisor; `1` is a single process "
            "with no supervisor (see [Workers](#workers))")
    worker_ports: int | None = setting(
        None, flag="--worker-ports", metavar="BASE",
        doc="tests and benchmarks: worker K also listens on `BASE + K - 1`, so a client can "
            "talk to one worker")
    app: str | None = setting(
        None, flag="--app", metavar="MODULE:ATTR", check=check_module_attribute,
        doc="tests and benchmarks: serve this ASGI app in the broker's place (no database), "
            "e.g. an empty app for the HTTP ceiling")
    # Operations.
    stats_interval_seconds: float = setting(
        10.0, env="STATS_INTERVAL_MS", parse=parse_int, milliseconds=True, check=POSITIVE,
        doc="how often each broker process samples its figures into PostgreSQL, in ms (an "
            "integer); see [Monitoring](#monitoring)")
    metrics_retention_days: int = setting(
        7, env="METRICS_RETENTION_DAYS", check=at_least(1),
        doc="days samples are kept; the reference's default is 90")
    worker_id: str | None = setting(
        None, env="QUEEN_WORKER_ID", shown="`hostname:pid`",
        doc="the name this process goes by in samples, `/health`, `/metrics` and the status "
            "routes; with `--workers N` each worker adds `-K`, its number")
    # Not settings: set in a worker process, its number, 1 to workers (None: not a worker);
    # and where each setting came from ("PORT", "--port", ...), to name it in an error.
    worker_index: int | None = None
    sources: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **flags: Any) -> Settings:
        """Settings from the environment; `flags` are the command line's (None: not given),
        which win over their variables. A flag's text is parsed as its variable's would be; a
        value already typed is taken as it is."""
        values, sources = read_env(cls, os.environ if env is None else env)
        for name, value in flags.items():
            found = declaration_of(cls, name)
            if value is None:
                continue
            sources[name] = (found and found[1].flag) or name
            if found is not None and isinstance(value, str):
                value = found[1].value_of(found[0], sources[name], value)
            values[name] = value
        settings = cls(**values, sources=sources)
        settings.check()
        return settings

    def source(self, field: str) -> str:
        """The variable or flag a setting came from, for error messages."""
        found = declaration_of(Settings, field)
        return self.sources.get(field) or (found[1].name(field) if found else field)

    @property
    def uses_data_dir(self) -> bool:
        """Whether the data directory holds this broker's cluster or spool (then one broker
        per directory: storage/datadir.py)."""
        return self.database_url is None or self.spool_dir is None

    @property
    def data_dir_fix(self) -> str:
        """What a second broker refused on this data directory should be given instead."""
        if self.database_url is None:
            return ("a second broker needs its own --data-dir (or QUEEN_DATA_DIR), and the "
                    "first one's database as DATABASE_URL to share its queues: "
                    "docs/operations.md#two-brokers-on-one-database")
        return ("with DATABASE_URL this broker keeps only its spool there: give it its own "
                "FILE_BUFFER_DIR, or its own --data-dir (or QUEEN_DATA_DIR)")

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
    def lane_shards(self) -> int:
        """Each worker's shard committers: QUEEN_PUSH_SHARDS when set, else the broker's
        PUSH_SHARDS_PER_BROKER split over its workers."""
        if self.push_shards is not None:
            return self.push_shards
        return max(1, PUSH_SHARDS_PER_BROKER // self.workers)

    @property
    def pool_per_worker(self) -> int:
        """Each worker's share of DB_POOL_SIZE, never below what its push shards need."""
        if self.workers == 1:
            return self.db_pool_size
        return max(self.db_pool_size // self.workers, self.lane_shards + 2)

    @property
    def embedded_max_connections(self) -> int:
        """The embedded cluster's max_connections: every worker's pools, LISTEN connection and
        ephemeral membership session, and a reserve; at least PostgreSQL's default."""
        return max(self.workers * (self.pool_per_worker + self.kv_pool_size + 2)
                   + RESERVED_CONNECTIONS,
                   MIN_EMBEDDED_CONNECTIONS)

    def check(self) -> None:
        """Each setting against its declaration, then the rules that involve two."""
        check_each(self, self.sources)
        if self.lane_shards >= self.db_pool_size:
            raise ConfigError(f"{self.source('push_shards')}={self.lane_shards} must be below "
                              f"{self.source('db_pool_size')}={self.db_pool_size}")
        if self.worker_ports is not None and not (
                0 < self.worker_ports and self.worker_ports + self.workers - 1 < 65536):
            raise ConfigError(f"{self.source('worker_ports')} {self.worker_ports} with "
                              f"{self.workers} workers runs out of ports (1 to 65535)")


# -- the docs' tables -----------------------------------------------------------------------

_TABLE = re.compile(r"(<!-- settings: (\w+) -->\n).*?(<!-- /settings -->)", re.S)


def with_tables(page: str) -> str:
    """A docs page with each block from `<!-- settings: Settings -->` (or `AuthSettings`) to
    `<!-- /settings -->` made anew from the declarations."""
    classes = {"Settings": Settings, "AuthSettings": AuthSettings}
    return _TABLE.sub(lambda block: block[1] + markdown_table(classes[block[2]]) + block[3], page)
