"""The spool's directory (push/spool.py) is one broker's: a second one refuses to open it."""

from __future__ import annotations

import pytest

from queen_trio.errors import ConfigError
from queen_trio.push.spool import Spool


async def test_a_spool_directory_belongs_to_one_broker(tmp_path):
    first = Spool(tmp_path)
    await first.open()
    try:
        with pytest.raises(ConfigError, match="belongs to another running broker"):
            await Spool(tmp_path).open()
    finally:
        await first.close()
