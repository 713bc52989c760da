"""What a command can fail with: one line for stderr and the exit status scripts branch on."""

from __future__ import annotations

from ..exits import Exit


class CliError(Exception):
    """A failure the user is told about in one line; `main` prints it and exits `status`."""

    def __init__(self, message: str, status: Exit = Exit.REFUSED) -> None:
        super().__init__(message)
        self.status = status


class StdoutClosed(BaseException):  # a signal, like KeyboardInterrupt
    """The reader of our standard output went away (SIGPIPE or EPIPE). Not an `Exception`,
    so that no library swallows it on its way out of a blocking call."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP: the command cleans up, then exits 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def status_for_http(code: int) -> Exit:
    """The exit status for an HTTP error status (docs/cli.md, "Exit codes")."""
    if code in (401, 403):
        return Exit.AUTH
    if code == 404:
        return Exit.NOT_FOUND
    if code == 501:  # a refusal, not an outage: retrying will not help
        return Exit.REFUSED
    if code >= 500:
        return Exit.UNREACHABLE
    return Exit.REFUSED
