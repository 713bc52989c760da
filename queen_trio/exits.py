"""The exit statuses of every `queen-trio` command, one meaning each."""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    OK = 0
    REFUSED = 1  # the request was refused, or only part of it was done
    USAGE = 2  # a bad command line or configuration
    AUTH = 3  # no token, or the token is not good enough
    EMPTY = 4  # the answer is empty (a trace with no events)
    NOT_FOUND = 5
    UNREACHABLE = 6  # the broker cannot be reached, or answered 5xx
    INTERRUPTED = 130  # Ctrl-C (a second SIGTERM exits 143, as the shell would)
