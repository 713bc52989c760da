"""queen-trio: a partitioned message-queue broker, wire-compatible with Queen MQ."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .settings import ConfigError, Settings

__all__ = ["ConfigError", "Settings", "__version__"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: the pytest plugin is registered in every pytest run where this
    # package is installed, and must cost nothing there until a queen_* fixture is used.
    if name in ("ConfigError", "Settings"):
        from . import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'queen_trio' has no attribute {name!r}")
