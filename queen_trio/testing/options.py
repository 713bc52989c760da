"""A test broker's settings: keyword arguments (and marker arguments) to `Settings`.

Any `Settings` field may be given by name, plus `encryption=True`, which gives the broker a
fresh encryption key. The broker's address (127.0.0.1, an ephemeral port), its database and
its data directories are the test broker's own: they cannot be given. Arguments travel to the
broker's process as JSON, and their JSON text is the key of the plugin's broker cache.
"""

from __future__ import annotations

import json
import secrets
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import cattrs

from ..errors import ConfigError
from ..settings import Settings, declaration_of

# What a test broker changes from a production one: a smaller pool, a quick shutdown.
TEST_DEFAULTS: dict[str, Any] = {"db_pool_size": 10, "push_shards": 2,
                                 "graceful_timeout_seconds": 1.0}
# Fields the test broker sets itself (it is one broker in one process, serving the broker).
OWN_FIELDS = ("host", "port", "data_dir", "database_url", "spool_dir", "workers",
              "worker_ports", "worker_index", "app", "sources")
ENCRYPTION = "encryption"

_converter = cattrs.Converter()


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if attrs.has(type(value)):
        return _converter.unstructure(value)
    return value


def normalise(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Check the names, and turn the values into JSON's (TypeError names a bad one)."""
    known = {f.name for f in attrs.fields(Settings)}
    out: dict[str, Any] = {}
    for name, value in overrides.items():
        if name in OWN_FIELDS:
            raise TypeError(f"the test broker sets {name} itself; give database_url to "
                            "TestBroker/open_test_broker, or the ini option queen_database_url")
        if name != ENCRYPTION and name not in known:
            raise TypeError(f"{name!r} is not a setting; use a field of queen_trio.Settings "
                            f"or {ENCRYPTION}=True")
        if name != ENCRYPTION:
            check_value(name, value)
        out[name] = _jsonable(value)
    json.dumps(out)  # a value JSON cannot carry is refused here, not in the broker's process
    try:  # the ranges and the rules of two settings, as the broker's process would check them
        build_settings(out)
    except ConfigError as exc:
        raise ValueError(f"{exc} ({', '.join(f'{k}={v!r}' for k, v in out.items())})") from None
    return out


# The Python values a field of each type takes (a Path may be given as text).
_TAKES: dict[Any, tuple[type, ...]] = {int: (int,), float: (int, float), str: (str,),
                                      bool: (bool,), Path: (str, Path)}
_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
          Path: "a path", type(None): "None"}


def check_value(name: str, value: Any) -> None:
    """TypeError or ValueError naming the setting when `value` cannot be its value: of another
    type (`default_batch_size="many"`), or text its variable would refuse
    (`log_level="loud"`). Settings of other shapes (auth, role names) are left to the broker."""
    field = attrs.fields_dict(attrs.resolve_types(Settings))[name]
    kinds = typing.get_args(field.type) or (field.type,)
    if typing.get_origin(field.type) is tuple:  # a list of text
        if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
            raise TypeError(f"{name}={value!r} is not a list of strings")
        return
    if any(kind not in _TAKES and kind is not type(None) for kind in kinds):
        return
    allowed = tuple(t for kind in kinds for t in _TAKES.get(kind, (type(None),)))
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        words = " or ".join(_WORDS[kind] for kind in kinds)
        raise TypeError(f"{name}={value!r} is not {words}")
    declared = declaration_of(Settings, name)
    if isinstance(value, str) and declared is not None and declared[1].parse is not None:
        try:
            declared[1].parse(name, value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None


def cache_key(overrides: Mapping[str, Any]) -> str:
    return json.dumps(normalise(overrides), sort_keys=True)


def build_settings(overrides: Mapping[str, Any], **own: Any) -> Settings:
    """The broker's Settings: the test defaults, then `overrides`, then its own fields."""
    values: dict[str, Any] = {**TEST_DEFAULTS, **overrides}
    if values.pop(ENCRYPTION, False) and not values.get("encryption_key"):
        values["encryption_key"] = secrets.token_hex(32)
    values.update({k: _jsonable(v) for k, v in own.items()})
    base = _converter.unstructure(Settings())
    settings = _converter.structure({**base, **values}, Settings)
    settings.check()
    return settings


def settings_to_json(settings: Settings) -> dict[str, Any]:
    return _converter.unstructure(settings)  # type: ignore[no-any-return]


def settings_from_json(data: Mapping[str, Any]) -> Settings:
    return _converter.structure(dict(data), Settings)
