"""Help texts: every command's `--help` ends with examples, laid out as written."""

from __future__ import annotations


def examples(*lines: str) -> str:
    """A click epilog of examples. Each line is a command, optionally followed by `  # what it
    does`; `\\b` keeps click from re-wrapping them."""
    shown = []
    for text in lines:
        command, _, comment = text.partition("  # ")
        shown.append(f"  {command}" + (f"\n      {comment}" if comment else ""))
    return "\b\nExamples:\n" + "\n".join(shown)
