"""Queue options: wire names, defaults, validation (cattrs) and the configure merge rules."""

from __future__ import annotations

from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

INT32_MAX = 2**31 - 1


def _non_negative(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not 0 <= value <= INT32_MAX:
        raise ValueError(f"{_wire_name(attribute.name)} must be between 0 and {INT32_MAX}")


def _int32(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not -(2**31) <= value <= INT32_MAX:
        raise ValueError(f"{_wire_name(attribute.name)} is out of range")


def _wire_name(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(part.capitalize() for part in rest)


@attrs.frozen
class QueueOptions:
    """Effective options of a queue. Defaults are those of a configured queue."""

    priority: int = attrs.field(default=0, validator=_int32)
    lease_time: int = attrs.field(default=300, validator=_non_negative)
    retry_limit: int = attrs.field(default=3, validator=_non_negative)
    retry_delay: int = attrs.field(default=0, validator=_non_negative)
    max_size: int = attrs.field(default=0, validator=_non_negative)
    ttl: int = attrs.field(default=3600, validator=_non_negative)
    dead_letter_queue: bool = True
    dlq_after_max_retries: bool = False
    delayed_processing: int = attrs.field(default=0, validator=_non_negative)
    window_buffer: int = attrs.field(default=0, validator=_non_negative)
    retention_seconds: int = attrs.field(default=0, validator=_non_negative)
    completed_retention_seconds: int = attrs.field(default=0, validator=_non_negative)
    retention_enabled: bool = False
    encryption_enabled: bool = False
    max_wait_time_seconds: int = attrs.field(default=0, validator=_non_negative)
    dedup_window_seconds: int = attrs.field(default=3600, validator=_non_negative)

    @classmethod
    def implicit(cls) -> QueueOptions:
        """A queue created by a push: the one difference is its 60 s lease (seed)."""
        return cls(lease_time=60)

    def to_wire(self) -> dict[str, Any]:
        return converter.unstructure(self)  # type: ignore[no-any-return]

    def to_columns(self) -> dict[str, Any]:
        return attrs.asdict(self)


FIELDS = tuple(f.name for f in attrs.fields(QueueOptions))
WIRE_NAMES = {_wire_name(name): name for name in FIELDS}


class OptionsError(ValueError):
    """An option has the wrong type or range; the message names it."""


def _strict_int(value: Any, _type: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise TypeError("must be an integer")
    return value


def _strict_bool(value: Any, _type: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError("must be a boolean")
    return value


converter = cattrs.Converter()
converter.register_structure_hook(int, _strict_int)
converter.register_structure_hook(bool, _strict_bool)
_renames = {name: override(rename=_wire_name(name)) for name in FIELDS}
converter.register_structure_hook(
    QueueOptions, make_dict_structure_fn(QueueOptions, converter, **_renames)  # type: ignore[arg-type]
)
converter.register_unstructure_hook(
    QueueOptions, make_dict_unstructure_fn(QueueOptions, converter, **_renames)  # type: ignore[arg-type]
)


def split_known(options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(known options by wire name, names of unknown options in request order)."""
    known = {k: v for k, v in options.items() if k in WIRE_NAMES}
    return known, [k for k in options if k not in WIRE_NAMES]


def effective(explicit: dict[str, Any]) -> QueueOptions:
    """The configured defaults overlaid with the explicitly set options (wire names)."""
    try:
        return converter.structure(explicit, QueueOptions)
    except cattrs.ClassValidationError as exc:
        raise OptionsError("; ".join(_describe(exc))) from None
    except (ValueError, TypeError) as exc:
        raise OptionsError(str(exc)) from None


def _describe(exc: cattrs.ClassValidationError) -> list[str]:
    messages: list[str] = []
    for sub in exc.exceptions:
        note = next(iter(getattr(sub, "__notes__", [])), "")
        field = note.rpartition("attribute ")[2]
        if field in FIELDS:
            messages.append(f"option {_wire_name(field)} {sub}")
        else:
            messages.append(str(sub))
    return messages or [str(exc)]


def merge(
    current: dict[str, Any], requested: dict[str, Any], *, replace: bool
) -> dict[str, Any]:
    """New explicit options: merge (null resets) or replace (the request is the whole config)."""
    merged = {} if replace else dict(current)
    for key, value in requested.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged
