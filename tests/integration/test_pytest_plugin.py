"""The pytest plugin, through pytester: each case runs pytest on a small project in a
process of its own, as a user's project would.

Most runs use the suite's own PostgreSQL (ini queen_database_url) to stay quick; the xdist
run uses embedded clusters, one per worker, copied from the user's template cache.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from queen_trio.testing import cluster_cache
from tests.support.leftovers import processes_mentioning

HELPERS = '''
import json, os
import httpx

def note(**fields):
    with open(os.environ["QUEEN_PROBE_LOG"], "a") as f:
        f.write(json.dumps(fields) + "\\n")

def push(url, queue, *payloads):
    r = httpx.post(url + "/api/v1/push",
                   json={"items": [{"queue": queue, "payload": p} for p in payloads]})
    assert r.status_code == 201, r.text
    return r.json()

def pop(url, queue, **params):
    r = httpx.get(url + "/api/v1/pop/queue/" + queue, params={k: str(v) for k, v in params.items()})
    return [] if r.status_code == 204 else [m["data"] for m in r.json()["messages"]]

def trace(url, message, name, step):
    r = httpx.post(url + "/api/v1/traces", json={
        "transactionId": message["transactionId"], "partitionId": message["partitionId"],
        "data": {"step": step}, "traceNames": [name]})
    assert r.status_code == 201, r.text
'''


@pytest.fixture(scope="session")
def user_cache() -> Path:
    # Read before pytester points HOME at its own directory.
    return cluster_cache.cache_root()


@pytest.fixture
def project(pytester: pytest.Pytester, user_cache: Path, monkeypatch: pytest.MonkeyPatch,
            tmp_path: Path) -> pytest.Pytester:
    monkeypatch.setenv(cluster_cache.CACHE_ENV, str(user_cache))
    monkeypatch.setenv("QUEEN_PROBE_LOG", str(tmp_path / "probe.log"))
    # Under `pytest -n`, this test runs in an xdist worker, whose environment says so and sets
    # COLUMNS=80 (which cuts the traces table): the project's own pytest is not that worker.
    for name in [n for n in os.environ if n.startswith("PYTEST_XDIST_")] + ["COLUMNS", "LINES"]:
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(probe=HELPERS)
    return pytester


def write_ini(pytester: pytest.Pytester, *lines: str) -> None:
    pytester.makeini("\n".join([
        "[pytest]", "asyncio_default_fixture_loop_scope = function", "filterwarnings = error",
        *lines]))


def notes(tmp_path: Path) -> list[dict]:
    path = tmp_path / "probe.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_fixtures_isolation_markers_ini_and_the_broker_cache(
        project: pytest.Pytester, admin_url: str, tmp_path: Path) -> None:
    write_ini(project, f"queen_database_url = {admin_url}",
              "queen_settings =", "    default_batch_size=2")
    project.makepyfile(test_app=textwrap.dedent('''
        import pytest
        from probe import note, pop, push

        def test_first_pushes(queen_url):
            note(test="first", url=queen_url)
            push(queen_url, "shared", 1, 2, 3)
            assert pop(queen_url, "shared") == [1, 2]  # the ini's default batch

        def test_second_sees_an_empty_broker(queen_url, queen_broker):
            note(test="second", url=queen_url, session=queen_broker.url)
            assert pop(queen_url, "shared") == []
            assert queen_broker.settings.default_batch_size == 2

        @pytest.mark.queen(encryption=True)
        def test_an_encrypted_broker(queen_url):
            import httpx
            note(test="encrypted", url=queen_url)
            r = httpx.post(queen_url + "/api/v1/configure",
                           json={"queue": "secret", "options": {"encryptionEnabled": True}})
            assert r.json()["options"]["encryptionEnabled"] is True
            push(queen_url, "secret", {"card": 4242})
            assert pop(queen_url, "secret") == [{"card": 4242}]

        @pytest.mark.queen(encryption=True)
        class TestUnderOneMarker:
            def test_shares_the_encrypted_broker_and_is_empty(self, queen_url):
                note(test="encrypted again", url=queen_url)
                assert pop(queen_url, "secret") == []

            @pytest.mark.queen(default_batch_size=1)
            def test_the_closest_marker_wins(self, queen_url):
                note(test="closest", url=queen_url)
                push(queen_url, "q", 1, 2, 3)
                assert pop(queen_url, "q") == [1]

        @pytest.mark.asyncio
        async def test_the_official_client(queen_client):
            await queen_client.queue("client").push([{"data": {"x": 1}}])
            messages = await queen_client.queue("client").batch(5).pop()
            assert [m["data"] for m in messages] == [{"x": 1}]

        @pytest.mark.queen(no_such_setting=1)
        def test_a_bad_marker_is_named(queen_url):
            pass

        @pytest.mark.queen(default_batch_size="many")
        def test_a_bad_value_is_named(queen_url):
            pass

        def test_fails_and_shows_no_traces_without_the_option(queen_url):
            push(queen_url, "q", 1)
            assert False, "expected to fail"
    '''))
    before = _test_databases(admin_url)
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6, failed=1, errors=2)
    result.stdout.fnmatch_lines(["*test_a_bad_marker_is_named*", "*'no_such_setting' is not a setting*"])
    # Issue 25, point 12: a value the setting cannot take is one readable line.
    result.stdout.fnmatch_lines(["*test_a_bad_value_is_named*",
                                 "*@pytest.mark.queen: default_batch_size='many' is not an "
                                 "integer*"])
    assert "ClassValidationError" not in result.stdout.str()
    assert "queen-trio traces" not in result.stdout.str()
    seen = {n["test"]: n for n in notes(tmp_path)}
    default = seen["first"]["url"]
    assert seen["second"]["url"] == seen["second"]["session"] == default
    assert seen["encrypted"]["url"] == seen["encrypted again"]["url"] != default
    assert seen["closest"]["url"] not in (default, seen["encrypted"]["url"])
    assert _test_databases(admin_url) == before, "the run's databases were dropped"


def test_two_xdist_workers_get_clusters_of_their_own_and_leave_nothing_behind(
        project: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    write_ini(project)
    project.makepyfile(test_many=textwrap.dedent('''
        import os
        import pytest
        from probe import note, pop, push

        @pytest.mark.parametrize("n", range(8))
        def test_each_test_sees_only_its_own_messages(queen_url, n):
            note(worker=os.environ["PYTEST_XDIST_WORKER"], url=queen_url, n=n)
            push(queen_url, "q", n)
            assert pop(queen_url, "q", batch=10) == [n]
    '''))
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=8)
    by_worker: dict[str, set[str]] = {}
    for note in notes(tmp_path):
        by_worker.setdefault(note["worker"], set()).add(note["url"])
    assert sorted(by_worker) == ["gw0", "gw1"]
    assert all(len(urls) == 1 for urls in by_worker.values()), "one broker per worker"
    assert by_worker["gw0"] != by_worker["gw1"]
    assert processes_mentioning(str(private_tmp)) == [], "a cluster or host outlived the run"
    assert list(private_tmp.iterdir()) == [], "a data directory outlived the run"


def test_queen_traces_show_what_a_failing_test_recorded_and_pushed(
        project: pytest.Pytester, admin_url: str) -> None:
    write_ini(project, f"queen_database_url = {admin_url}")
    project.makepyfile(test_flow=textwrap.dedent('''
        import httpx
        from probe import push, trace

        def test_an_order_that_goes_wrong(queen_url):
            push(queen_url, "orders", {"id": 7}, {"id": 8})
            first = httpx.get(queen_url + "/api/v1/pop/queue/orders").json()["messages"][0]
            trace(queen_url, first, "order-7", "charged")
            trace(queen_url, first, "order-7", "shipped")
            assert False, "the order was never delivered"

        def test_nothing_recorded(queen_url):
            assert False

        def test_passes(queen_url):
            push(queen_url, "orders", {"id": 9})

        def test_without_a_broker():
            assert False
    '''))
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--queen-traces")
    result.assert_outcomes(passed=1, failed=3)
    out = result.stdout.str()
    assert out.count("queen-trio traces") == 2
    result.stdout.fnmatch_lines([
        "*_ test_an_order_that_goes_wrong _*",
        "*queen-trio traces*",
        "1 trace name and 2 messages pushed during the test (http://127.0.0.1:*)",
        "trace 'order-7': 2 events on 1 message",
        "TIME*QUEUE/PARTITION*GROUP*EVENT*TRANSACTION*DATA",
        '*orders/Default*info*{"step":"charged"}',
        '*orders/Default*info*{"step":"shipped"}',
        "messages pushed: 2",
        '*orders/Default*pushed*{"id":7}',
        '*orders/Default*info*{"step":"charged"}',
        '*orders/Default*info*{"step":"shipped"}',
        '*orders/Default*pushed*{"id":8}',
        "*_ test_nothing_recorded _*",
        "*queen-trio traces*",
        "no trace recorded and no message pushed during the test*",
    ])
    assert '{"id":9}' not in out


def test_queen_keep_data_leaves_the_data_directory_and_the_databases(
        project: pytest.Pytester, admin_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    write_ini(project, f"queen_database_url = {admin_url}", "queen_keep_data = true")
    project.makepyfile(test_kept=textwrap.dedent('''
        from probe import push

        def test_pushes(queen_url):
            push(queen_url, "kept", 1)
    '''))
    before = _test_databases(admin_url)
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    kept = _test_databases(admin_url) - before
    (data_dir,) = private_tmp.iterdir()
    try:
        assert len(kept) == 1, "the broker's database is kept"
        assert data_dir.name.startswith("queen-trio-test-")
        assert processes_mentioning(str(private_tmp)) == [], "kept data, nothing running"
    finally:
        _drop_databases(admin_url, kept)


def test_the_plugin_does_nothing_until_a_fixture_is_used(project: pytest.Pytester) -> None:
    write_ini(project)
    project.makepyfile(test_plain=textwrap.dedent('''
        import os, sys
        from pathlib import Path

        def children():
            me = str(os.getpid())
            return [p.name for p in Path("/proc").iterdir() if p.name.isdigit()
                    and (p / "stat").exists()
                    and (p / "stat").read_text().rsplit(")", 1)[-1].split()[1] == me]

        def test_registered_but_idle(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin("queen_trio")
            loaded = [m for m in ("queen_trio.testing", "queen_trio.settings",
                                  "queen_trio.broker", "trio_asyncio", "asyncpg")
                      if m in sys.modules]
            assert loaded == []
            assert children() == []
    '''))
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--queen-traces")
    result.assert_outcomes(passed=1)


def test_test_broker_beside_asyncio_tests_and_unittest(
        project: pytest.Pytester, admin_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUEEN_PROBE_URL", admin_url)
    write_ini(project)
    project.makepyfile(test_asyncio_code=textwrap.dedent('''
        import asyncio, os, sys, unittest
        import httpx, pytest
        from queen_trio.testing import TestBroker

        def stock_loop():
            loop = asyncio.get_running_loop()
            return type(loop).__module__.startswith("asyncio.") and "trio_asyncio" not in sys.modules

        @pytest.fixture(scope="module")
        def broker():
            with TestBroker(database_url=os.environ["QUEEN_PROBE_URL"]) as b:
                yield b

        @pytest.mark.asyncio
        async def test_an_asyncio_test_talks_to_the_broker(broker):
            assert stock_loop()
            async with httpx.AsyncClient(base_url=broker.url) as client:
                r = await client.post("/api/v1/push", json={"items": [{"queue": "a", "payload": 1}]})
                assert r.status_code == 201
                r = await client.get("/api/v1/pop/queue/a")
                assert r.json()["messages"][0]["data"] == 1
            broker.reset()

        def test_asyncio_run_keeps_asyncio_s_own_loop(broker):
            async def kind():
                return stock_loop()
            assert asyncio.run(kind())

        class TestUnittest(unittest.IsolatedAsyncioTestCase):
            @classmethod
            def setUpClass(cls):
                cls.broker = TestBroker(database_url=os.environ["QUEEN_PROBE_URL"]).start()

            @classmethod
            def tearDownClass(cls):
                cls.broker.close()

            async def test_pushes_from_unittest(self):
                self.assertTrue(stock_loop())
                async with httpx.AsyncClient() as client:
                    r = await client.post(self.broker.url + "/api/v1/push",
                                          json={"items": [{"queue": "u", "payload": 2}]})
                self.assertEqual(r.status_code, 201)
    '''))
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def _test_databases(admin_url: str) -> set[str]:
    import asyncio

    import asyncpg

    async def read() -> set[str]:
        conn = await asyncpg.connect(admin_url)
        try:
            return {r[0] for r in await conn.fetch(
                "SELECT datname FROM pg_database WHERE datname LIKE 'queen_test_%'")}
        finally:
            await conn.close()

    return asyncio.run(read())


def _drop_databases(admin_url: str, names: set[str]) -> None:
    import asyncio

    import asyncpg

    async def drop() -> None:
        conn = await asyncpg.connect(admin_url)
        try:
            for name in names:
                await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())
