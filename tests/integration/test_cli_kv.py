"""`queen-trio kv get|put|del|list` and `queen-trio locks list`: output formats and exit
statuses."""

from __future__ import annotations

import yaml

from tests.support.cli import gather, run_cli


async def test_kv_put_and_its_refusals(http_url):
    s = ("--server", http_url)
    put = await run_cli("kv", "put", "app", "greeting", '{"text": "hi"}', "--ttl", "600", *s,
                        "-o", "json")
    assert put.status == 0, put.err
    version = put.json()["version"]
    plain = await run_cli("kv", "put", "app", "word", "not json", "--forever", *s, "-o", "json")
    assert plain.status == 0 and plain.json()["value"] == "not json"
    assert (await run_cli("kv", "put", "app", "x", "1", *s)).status == 2  # no expiry given
    stale = await run_cli("kv", "put", "app", "greeting", "2", "--forever", "--expect",
                          str(version + 50), *s, "-o", "json")
    assert stale.status == 1 and stale.json()["reason"] == "version"
    bad = await run_cli("kv", "get", "Bad", "k", *s)
    assert bad.status == 1 and "kv_bad_namespace" in bad.err
    assert len(bad.err.strip().splitlines()) == 1


async def test_kv_get_list_del_and_locks_list(http_url, client):
    s = ("--server", http_url)
    r = await client.post("/api/v1/kv", json={"operations": [
        {"op": "put", "ns": "app", "key": "greeting", "value": {"text": "hi"}, "ttlSeconds": 600},
        {"op": "put", "ns": "app", "key": "word", "value": "w", "forever": True}]})
    version = r.json()["results"][0]["version"]
    await client.post("/api/v1/locks", json={"operations": [
        {"op": "acquire", "name": "nightly", "ttlSeconds": 600, "owner": "me"}]})
    (got, missing, table, names, spaces, as_yaml, held) = await gather(
        run_cli("kv", "get", "app", "greeting", *s, "-o", "json"),
        run_cli("kv", "get", "app", "nope", *s, "-o", "json"),
        run_cli("kv", "list", "app", *s, "-o", "table"),
        run_cli("kv", "list", "app", "--prefix", "gr", *s, "-o", "name"),
        run_cli("kv", "list", *s, "-o", "json"),
        run_cli("kv", "list", "app", *s, "-o", "yaml"),
        run_cli("locks", "list", *s, "-o", "json"),
    )
    assert got.status == 0 and got.json()["value"] == {"text": "hi"}
    assert got.json()["version"] == version
    assert missing.status == 5 and missing.json()["found"] is False
    assert table.status == 0 and "greeting" in table.out and "VERSION" in table.out
    assert names.out.split() == ["greeting"]
    assert {n["namespace"] for n in spaces.json()} == {"app", "queen-locks"}
    assert [r["key"] for r in yaml.safe_load(as_yaml.out)] == ["greeting", "word"]
    assert held.json()[0]["owner"] == "me" and held.json()[0]["name"] == "nightly"
    deleted = await run_cli("kv", "del", "app", "greeting", *s)
    again, empty = await gather(run_cli("kv", "del", "app", "greeting", *s),
                                run_cli("kv", "list", "empty", *s, "-o", "json"))
    assert (deleted.status, again.status, empty.status) == (0, 5, 4)
