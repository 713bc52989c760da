"""The HTTP routes: their table (table.py) and a module of handlers per feature."""

from .table import NOT_IN_THIS_BROKER, ROUTES, create_app

__all__ = ["NOT_IN_THIS_BROKER", "ROUTES", "create_app"]
