"""The pytest plugin: a real queen-trio broker as fixtures (docs/testing.md).

It is registered through the `pytest11` entry point whatever extras are installed, so until a
`queen_*` fixture is used it does nothing: it imports nothing of the broker, starts nothing
and changes no setting; it only declares its command-line option, its ini keys and the
`queen` marker.

Fixtures:

- `queen_broker` (session): the session's default broker, a `queen_trio.testing.TestBroker`
  (`.url`, `.settings`, `.reset()`), on one PostgreSQL for the session (per xdist worker):
  an embedded cluster copied from the template cache, or the `queen_database_url` server.
- `queen_url`: the base URL of an empty broker, for each test. The broker is the one for the
  test's settings (ini `queen_settings`, then `@pytest.mark.queen(...)` markers, the closest
  last), started once per distinct settings and `reset()` before each test that uses it.
- `queen_client`: a queen-mq `Queen` bound to `queen_url` (needs queen-mq, which the
  `pytest` extra brings: docs/testing.md#installing).

With `--queen-traces`, the report of a failing test that used one of them shows the trace
timelines recorded and the messages pushed during the test, rendered as `queen-trio trace`
renders them.
"""

from __future__ import annotations

import datetime
import io
import json
import signal
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .testing import BrokerHost, TestBroker

MARKER = "queen"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("queen-trio", "queen-trio test broker")
    group.addoption("--queen-traces", action="store_true", default=False,
                    help="in the report of a failing test that used a queen_* fixture, show "
                         "the trace timelines recorded and the messages pushed during it")
    parser.addini("queen_database_url", default="",
                  help="a PostgreSQL server for the test brokers (its role needs CREATEDB; "
                       "each broker gets a database of its own); empty: an embedded one")
    parser.addini("queen_settings", type="linelist", default=[],
                  help="settings of every test broker, one NAME=VALUE a line (VALUE read as "
                       "JSON, else as a string); markers override them")
    parser.addini("queen_keep_data", type="bool", default=False,
                  help="leave the test brokers' data directory and databases behind")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(**settings): the settings of the test's broker (queen_url, "
        "queen_client): any queen_trio.Settings field, or encryption=True")


# -- the session's brokers -------------------------------------------------------------------

class _Brokers:
    """One host process for the session, started on first use; one broker per settings."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._host: BrokerHost | None = None
        self._brokers: dict[str, TestBroker] = {}

    def host(self) -> BrokerHost:
        if self._host is None:
            from .testing import BrokerHost

            url = str(self._config.getini("queen_database_url") or "").strip()
            self._host = BrokerHost(database_url=url or None,
                                    keep_data=bool(self._config.getini("queen_keep_data")))
            self._host.start()
        return self._host

    def broker(self, settings: dict[str, Any]) -> TestBroker:
        from .testing.options import cache_key

        key = cache_key(settings)
        broker = self._brokers.get(key)
        if broker is None:
            broker = self._brokers[key] = self.host().open_broker(**settings)
        return broker

    def close(self) -> None:
        brokers, self._brokers = list(self._brokers.values()), {}
        host, self._host = self._host, None
        try:
            for broker in brokers:
                broker.close()
        finally:
            if host is not None:
                host.close()


_BROKERS = pytest.StashKey[_Brokers]()
# The broker a test used, and the database clock when its call began (--queen-traces).
_TEST_BROKER = pytest.StashKey["TestBroker"]()
_CALL_STARTED = pytest.StashKey[datetime.datetime]()


def _brokers(config: pytest.Config) -> _Brokers:
    if _BROKERS not in config.stash:
        brokers = config.stash[_BROKERS] = _Brokers(config)
        config.add_cleanup(brokers.close)
    return config.stash[_BROKERS]


def ini_settings(config: pytest.Config) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for line in config.getini("queen_settings"):
        name, sep, raw = str(line).partition("=")
        if not sep:
            raise pytest.UsageError(f"queen_settings: {line!r} is not NAME=VALUE")
        try:
            settings[name.strip()] = json.loads(raw)
        except ValueError:
            settings[name.strip()] = raw.strip()
    return settings


def settings_of(item: pytest.Item) -> dict[str, Any]:
    """The ini settings, then each `queen` marker's, from the farthest to the closest."""
    settings = ini_settings(item.config)
    for mark in reversed(list(item.iter_markers(MARKER))):
        if mark.args:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER} takes keyword "
                                    "arguments only (settings by name)")
        settings.update(mark.kwargs)
    return settings



# -- fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def queen_broker(request: pytest.FixtureRequest) -> TestBroker:
    """The session's default broker (ini settings): never reset by the plugin."""
    return _brokers(request.config).broker(ini_settings(request.config))


@pytest.fixture
def queen_url(request: pytest.FixtureRequest) -> str:
    """The base URL of an empty broker with the test's settings."""
    try:
        settings = settings_of(request.node)
        broker = _brokers(request.config).broker(settings)
    except (TypeError, ValueError) as exc:  # no such setting, or a value it cannot take
        pytest.fail(f"@pytest.mark.{MARKER}: {exc}", pytrace=False)
    broker.reset()
    request.node.stash[_TEST_BROKER] = broker
    return broker.url


@pytest.fixture
def queen_client(queen_url: str) -> Iterator[Any]:
    """A queen-mq `Queen` on `queen_url`, for asyncio tests. It opens a connection per
    request (none is kept), so nothing of it outlives the test's event loop."""
    try:
        import httpx
        from queen import Queen
    except ImportError:
        pytest.fail("queen_client needs the queen-mq package: pip install queen-mq (or "
                    "install queen-trio with its pytest extra: docs/testing.md#installing)",
                    pytrace=False)
    # Queen installs SIGINT/SIGTERM handlers of its own: pytest's come back after the test.
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
    try:
        yield Queen(queen_url, transport=transport)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


# -- --queen-traces --------------------------------------------------------------------------

def _broker_of(item: pytest.Item) -> TestBroker | None:
    broker = item.stash.get(_TEST_BROKER, None)
    if broker is None:
        broker = getattr(item, "funcargs", {}).get("queen_broker")
    return broker


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    if item.config.getoption("queen_traces"):
        broker = _broker_of(item)
        if broker is not None:
            item.stash[_CALL_STARTED] = broker.now()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None],
                               ) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed or _CALL_STARTED not in item.stash:
        return
    broker = _broker_of(item)
    if broker is None:
        return
    try:
        recorded = broker.recorded_since(item.stash[_CALL_STARTED])
    except Exception as exc:  # the report must not hide the test's own failure
        report.sections.append(("queen-trio traces", f"could not read the traces: {exc}"))
        return
    report.sections.append(("queen-trio traces", render_recorded(recorded, broker.url)))


def render_recorded(recorded: dict[str, Any], url: str) -> str:
    """The report section: each trace name's timeline, then each message pushed with its
    trace events; in the tables of `queen-trio trace` (cli/traces.py)."""
    from .cli.traces import plural, timeline_title

    out = io.StringIO()
    names, messages = recorded["trace_names"], recorded["messages"]
    total = recorded["messages_total"]
    if not names and not total:
        return f"no trace recorded and no message pushed during the test ({url})\n"
    print(f"{plural(len(names), 'trace name')} and {plural(total, 'message')} pushed during "
          f"the test ({url})", file=out)
    for name in names:
        timeline = recorded["timelines"][name]
        print(f"\n{timeline_title(name, timeline['traces'])}", file=out)
        _event_table(timeline["traces"], out)
        if timeline["total"] > len(timeline["traces"]):
            print(f"... and {plural(timeline['total'] - len(timeline['traces']), 'more event')}",
                  file=out)
    if messages:
        print(f"\nmessages pushed: {total}", file=out)
        rows: list[dict[str, Any]] = []
        for message in messages:
            place = {"queue_name": message["queue_name"],
                     "partition_name": message["partition_name"],
                     "transaction_id": message["transaction_id"]}
            rows.append({**place, "created_at": message["created_at"], "consumer_group": "",
                         "event_type": "pushed", "data": message["payload"]})
            rows.extend({**place, **event} for event in message["traces"])
        _event_table(rows, out)
        if total > len(messages):
            print(f"... and {plural(total - len(messages), 'more message')}", file=out)
    return out.getvalue()


def _event_table(events: list[dict[str, Any]], out: io.StringIO) -> None:
    """`queen-trio trace`'s table, written to `out` (it prints to stdout); as wide as its
    rows (pytest's output is no terminal), unless COLUMNS says otherwise."""
    from contextlib import redirect_stdout

    from .cli.output import cell, render_table
    from .cli.traces import EVENT_COLUMNS

    with redirect_stdout(out):
        render_table([c.header for c in EVENT_COLUMNS],
                     [[cell(c.value(e)) for c in EVENT_COLUMNS] for e in events])
