"""KV, locks and riders through the official client (queen-mq 2.6.0, unchanged): one broker,
`serve --workers 2`, and two brokers on one database."""

from __future__ import annotations

from tests.support.official import run_flow
from tests.support.processes import running_broker


def check_report(r: dict) -> None:
    assert r["put"]["applied"] is True
    assert r["get"] == {"found": True, "value": {"n": 1}, "version": r["put"]["version"]}
    assert r["get_missing"] is False
    assert r["cas_stale"]["applied"] is False and r["cas_stale"]["reason"] == "version"
    assert r["cas_ok"] is True
    assert r["pia_first"] is True
    assert r["pia_second"]["reason"] == "exists" and r["pia_second"]["value"] == "x"
    assert r["incr"] == [True, True, False]
    assert r["check"] is False
    assert r["delete"] is True and r["delete_again"]["reason"] == "absent"
    assert r["get_many"] == {"rows": ["a"], "missing": ["zz"]}
    assert r["get_prefix"] == {"keys": ["list/0", "list/1"], "truncated": True}
    assert r["list_all"] == [f"list/{n}" for n in range(5)]
    assert r["once"] == [True, False]
    assert r["bad_ns"]["status"] == 400 and r["bad_ns"]["reason"] == "kv_bad_namespace"
    assert r["tx_once"] == [True, False, "kv_precondition", "exists"]
    assert r["tx_once_pushed"] == []
    assert r["lock_acquired"] is True and r["other_acquired"] is False
    assert r["guarded"] is True
    assert r["token_after_renew"] > r["lock_token"] and r["lock_get"] == r["token_after_renew"]
    assert r["released"] is True
    assert r["semaphore"] == [True, True, False]
    assert r["supervision_keys"] == ["chunk/0000", "head"]


async def test_the_official_client_in_process(http_url):
    check_report(await run_flow("kv_flow.py", http_url))


async def test_the_official_client_with_workers(database_url, workers):
    async with running_broker({"DATABASE_URL": database_url}, workers=workers) as server:
        check_report(await run_flow("kv_flow.py", server.url))


async def test_the_official_client_over_two_brokers_on_one_database(database_url):
    async with running_broker({"DATABASE_URL": database_url}) as one, \
            running_broker({"DATABASE_URL": database_url}) as two:
        check_report(await run_flow("kv_flow.py", one.url, two.url))
