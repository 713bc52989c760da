"""A real queen-trio broker for other projects' tests (docs/testing.md).

    from queen_trio.testing import TestBroker

    with TestBroker() as broker:               # plain pytest, asyncio tests, unittest
        httpx.post(f"{broker.url}/api/v1/push", json={"items": [...]})
        broker.reset()                         # empty again, without a restart

    async with open_test_broker() as broker:   # Trio code: in this process
        ...

Both run one broker on an embedded PostgreSQL copied from a cached template (or on a given
server: `database_url=`), bind 127.0.0.1 on an ephemeral port, and leave nothing running and
no data directory behind. Importing this module loads neither the broker nor trio-asyncio:
`open_test_broker` loads them when called. The pytest plugin (queen_trio.pytest_plugin)
builds its fixtures on these.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from .process import BrokerHost, TestBroker, TestBrokerError

if TYPE_CHECKING:
    from .inprocess import RunningBroker

__all__ = ["BrokerHost", "TestBroker", "TestBrokerError", "open_test_broker"]


def open_test_broker(*, database_url: str | None = None, keep_data: bool = False,
                     **settings: Any) -> AbstractAsyncContextManager[RunningBroker]:
    """A broker in this process, for Trio code: `async with open_test_broker() as broker:`
    yields one with `.url`, `.settings`, `await .reset()`. `settings`: any `Settings` field,
    or `encryption=True`. `database_url`: run on that server (a database of its own is made
    there and dropped after); else on an embedded cluster. `keep_data`: leave the data
    directory (and the database) behind."""
    from .inprocess import open_test_broker as open_in_process

    return open_in_process(database_url=database_url, keep_data=keep_data, **settings)
