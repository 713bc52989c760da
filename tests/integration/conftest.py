"""Test fixtures: one embedded PostgreSQL per run, a fresh database per test.

Each test's database is cloned from a migrated template (CREATE DATABASE ... TEMPLATE), which
takes a few milliseconds. QUEEN_TEST_DATABASE_URL points the suite at an external server
instead (the role needs CREATEDB).
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import pytest
import trio

from queen_trio.broker import Broker, open_broker
from queen_trio.settings import Settings
from queen_trio.storage.embedded import EmbeddedPostgres
from queen_trio.storage.schema import apply_migrations
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings, serve_on_port
from tests.support.browser import Browser, chromium
from tests.support.clusters import cluster_dir, running_cluster
from tests.support.outage import execute_statements

# One template per xdist worker: on an external server (QUEEN_TEST_DATABASE_URL) the workers
# share, each drops and rebuilds its own.
TEMPLATE = "queen_test_template" + (
    f"_{os.environ['PYTEST_XDIST_WORKER']}" if "PYTEST_XDIST_WORKER" in os.environ else "")
_counter = itertools.count()


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


async def _migrate(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def embedded_postgres() -> Iterator[EmbeddedPostgres | None]:
    if os.environ.get("QUEEN_TEST_DATABASE_URL"):
        yield None
        return
    with cluster_dir() as folder, running_cluster(folder) as server:
        yield server


@pytest.fixture(scope="session")
def admin_url(embedded_postgres: EmbeddedPostgres | None) -> Iterator[str]:
    url = os.environ.get("QUEEN_TEST_DATABASE_URL") or embedded_postgres.url()  # type: ignore[union-attr]
    template = with_database(url, TEMPLATE)
    _run(execute_statements(url, f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)",
                f"CREATE DATABASE {TEMPLATE}"))
    _run(_migrate(template))
    yield url
    _run(execute_statements(url, f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)"))


@contextmanager
def new_database(admin_url: str, *, template: str | None = TEMPLATE) -> Iterator[str]:
    """A database of its own (migrated: cloned from the template), dropped afterwards."""
    name = f"queen_test_{os.getpid()}_{next(_counter)}"
    clone = f" TEMPLATE {template}" if template else ""
    _run(execute_statements(admin_url, f"CREATE DATABASE {name}{clone}"))
    try:
        yield with_database(admin_url, name)
    finally:
        _run(execute_statements(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture
def database_url(admin_url: str) -> Iterator[str]:
    with new_database(admin_url) as url:
        yield url


@pytest.fixture(scope="module")
def module_database_url(admin_url: str) -> Iterator[str]:
    """One migrated database for a whole module (tests that only read, or roll back)."""
    with new_database(admin_url) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for a module's dashboard tests (tests/support/browser.py)."""
    with chromium() as driver:
        yield Browser(driver)


@pytest.fixture
def empty_database_url(admin_url: str) -> Iterator[str]:
    """A database without the schema: no migration applied."""
    with new_database(admin_url, template=None) as url:
        yield url


@pytest.fixture
def cluster_path() -> Iterator[Path]:
    """A fresh directory for a test's own cluster or broker data directory (never tmp_path:
    tests/support/clusters.py says why)."""
    with cluster_dir() as path:
        yield path


@pytest.fixture(params=[1, 2], ids=lambda n: f"{n}-worker{'s' if n > 1 else ''}")
def workers(request: pytest.FixtureRequest) -> int:
    """Every test of a broker process runs as a single process and as a supervisor with two
    workers (tests/support/processes.py)."""
    return int(request.param)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
async def broker(settings: Settings) -> AsyncIterator[Broker]:
    async with open_broker(settings, settings.database_url or "") as b:
        yield b


@pytest.fixture
async def client(broker: Broker) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(broker))
    async with httpx.AsyncClient(transport=transport, base_url="http://broker") as c:
        yield c




@pytest.fixture
async def http_url(broker: Broker, nursery: trio.Nursery) -> str:
    bound = await nursery.start(serve_on_port, broker)
    return str(bound[0])
