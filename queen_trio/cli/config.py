"""The contexts file: named brokers, each a server and maybe a token, and the current one.

It lives at `$QUEEN_CONFIG`, else `$XDG_CONFIG_HOME/queen-trio/config.yaml`, else
`~/.config/queen-trio/config.yaml`, and is written 0600 (it holds tokens), atomically:

    current-context: prod
    contexts:
      prod: {server: https://queen.example.com, token-file: /run/secrets/queen}
      local: {server: http://localhost:6632}
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..exits import Exit
from .failures import CliError

CONTEXT_KEYS = ("server", "token", "token-file")


def config_path(env: Mapping[str, str]) -> Path:
    if env.get("QUEEN_CONFIG"):
        return Path(env["QUEEN_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "queen-trio" / "config.yaml"


@attrs.define
class Config:
    path: Path
    current: str | None = None
    contexts: dict[str, dict[str, str]] = attrs.Factory(dict)

    @classmethod
    def load(cls, path: Path) -> Config:
        """The file's contexts; a missing file is an empty configuration."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror}", Exit.USAGE) from None
        import yaml  # only when there is a file: `serve` and flag-only runs never load it

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise CliError(f"{path} is not YAML: {' '.join(str(exc).split())}",
                           Exit.USAGE) from None
        return cls(path, *_checked(path, data))

    def context(self, name: str) -> dict[str, str]:
        if name not in self.contexts:
            raise CliError(f"no context {name!r} in {self.path}", Exit.USAGE)
        return self.contexts[name]

    def save(self) -> None:
        import yaml

        data: dict[str, Any] = {"current-context": self.current, "contexts": self.contexts}
        text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        # Created 0600 whatever the umask: the file holds tokens.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)


def _checked(path: Path, data: Any) -> tuple[str | None, dict[str, dict[str, str]]]:
    def bad(why: str) -> CliError:
        return CliError(f"{path}: {why}", Exit.USAGE)

    if not isinstance(data, dict):
        raise bad("expected a mapping with current-context and contexts")
    unknown = set(data) - {"current-context", "contexts"}
    if unknown:
        raise bad(f"unknown key {sorted(unknown)[0]!r}")
    current = data.get("current-context")
    contexts = data.get("contexts") or {}
    if current is not None and not isinstance(current, str):
        raise bad("current-context must be a name")
    if not isinstance(contexts, dict):
        raise bad("contexts must be a mapping of names")
    for name, context in contexts.items():
        if not isinstance(context, dict) or not isinstance(context.get("server"), str):
            raise bad(f"context {name!r} needs a server")
        extra = set(context) - set(CONTEXT_KEYS)
        if extra:
            raise bad(f"context {name!r} has an unknown key {sorted(extra)[0]!r}")
        if not all(isinstance(v, str) for v in context.values()):
            raise bad(f"context {name!r}: every value is a string")
    return current, {str(k): dict(v) for k, v in contexts.items()}
