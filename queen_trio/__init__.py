"""queen-trio: a partitioned message-queue broker, wire-compatible with Queen MQ."""

__version__ = "0.1.0"

from .settings import ConfigError, Settings  # noqa: E402

__all__ = ["ConfigError", "Settings", "__version__"]
