"""The `queen-trio` command line: `serve` runs the broker; every other command is a client
of a running broker's HTTP API (docs/cli.md)."""

from .main import main

__all__ = ["main"]
