"""`queen-trio --help` says what the program is; every subcommand's help shows its defaults."""

from __future__ import annotations

import subprocess
import sys


def help_of(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "queen_trio", *args, "--help"],
                          capture_output=True, text=True, check=True)
    return done.stdout


def test_the_top_level_help_says_what_it_is_and_lists_commands_with_examples() -> None:
    text = help_of()
    assert "message-queue broker" in text and "PostgreSQL" in text
    assert "serve" in text and "trace" in text
    assert "examples:" in text and "queen-trio serve --port 7000" in text
    assert "4 empty result" in text


def test_serve_help_shows_every_default() -> None:
    text = " ".join(help_of("serve").split())
    for shown in ("HOST; default 0.0.0.0", "PORT; default 6632", "QUEEN_DATA_DIR; default /",
                  "default: none, the embedded PostgreSQL", "LOG_LEVEL; default info",
                  "LOG_REQUESTS; default off"):
        assert shown in text


def test_trace_help_shows_its_defaults_and_its_empty_exit() -> None:
    text = " ".join(help_of("trace").split())
    assert "default http://localhost:6632" in text and "default: none" in text
    assert "Exits 4 when the trace has no events" in text


def test_an_unknown_command_is_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "queen_trio", "bogus"], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "invalid choice" in done.stderr
