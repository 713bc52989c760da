"""KV and locks under concurrency, each over two broker processes on one database: one winner,
exact counters, no lost CAS update, admission never past `max`, and lock safety under a paused
holder and a SIGKILLed one (fencing through tx.guard)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import httpx
import trio

from tests.support.official import CLIENTS
from tests.support.processes import running_broker


async def kv(http: httpx.AsyncClient, url: str, *ops: dict) -> dict:
    for _ in range(50):
        r = await http.post(url + "/api/v1/kv", json={"operations": list(ops)})
        if r.status_code != 503:  # kv_unavailable: certainly not applied, so send it again
            break
        await trio.sleep(0.05)
    assert r.status_code == 200, r.text
    return r.json()


async def test_kv_races_over_two_brokers(database_url):
    async with running_broker({"DATABASE_URL": database_url}) as one, \
            running_broker({"DATABASE_URL": database_url}) as two, \
            httpx.AsyncClient(timeout=30) as http:
        urls = [one.url, two.url]

        # 16 concurrent putIfAbsent: exactly one winner, every loser told the winner's value.
        answers: list[dict] = []

        async def racer(n: int) -> None:
            body = await kv(http, urls[n % 2], {"op": "putIfAbsent", "ns": "race", "key": "pia",
                                                "value": n, "forever": True})
            answers.append(body["results"][0])

        async with trio.open_nursery() as nursery:
            for n in range(16):
                nursery.start_soon(racer, n)
        winners = [a for a in answers if a["applied"]]
        assert len(winners) == 1 and {a["value"] for a in answers} == {winners[0]["value"]}

        # N clients x M incr: exactly N x M; with max, never more admitted than max.
        admitted: list[bool] = []

        async def counter(n: int) -> None:
            for _ in range(10):
                await kv(http, urls[n % 2], {"op": "incr", "ns": "race", "key": "count",
                                             "delta": 1, "forever": True})
                body = await kv(http, urls[(n + 1) % 2], {
                    "op": "incr", "ns": "race", "key": "capped", "delta": 1, "max": 25,
                    "forever": True})
                admitted.append(body["results"][0]["applied"])

        async with trio.open_nursery() as nursery:
            for n in range(8):
                nursery.start_soon(counter, n)
        got = await kv(http, urls[0], {"op": "getMany", "ns": "race",
                                       "keys": ["count", "capped"]})
        values = {row["key"]: row["value"] for row in got["results"][0]["rows"]}
        assert values == {"count": 80, "capped": 25}
        assert admitted.count(True) == 25

        # A CAS loop with expect loses no update; one key's versions rise in commit order.
        await kv(http, urls[0], {"op": "put", "ns": "race", "key": "cas", "value": 0,
                                 "forever": True})
        versions: list[int] = []

        async def cas(n: int) -> None:
            done = 0
            while done < 5:
                [g] = (await kv(http, urls[n % 2], {"op": "get", "ns": "race",
                                                    "key": "cas"}))["results"]
                [w] = (await kv(http, urls[(n + 1) % 2], {
                    "op": "put", "ns": "race", "key": "cas", "value": g["value"] + 1,
                    "forever": True, "expect": g["version"]}))["results"]
                if w["applied"]:
                    done += 1
                    versions.append((g["value"] + 1, w["version"]))

        async with trio.open_nursery() as nursery:
            for n in range(6):
                nursery.start_soon(cas, n)
        [final] = (await kv(http, urls[1], {"op": "get", "ns": "race", "key": "cas"}))["results"]
        assert final["value"] == 30
        by_value = [v for _, v in sorted(versions)]
        assert by_value == sorted(by_value)  # later value, later commit, higher version


async def test_lock_safety_under_a_pause_and_a_kill(database_url):
    async with running_broker({"DATABASE_URL": database_url}) as one, \
            running_broker({"DATABASE_URL": database_url}) as two, \
            httpx.AsyncClient(timeout=30) as http:
        urls = [one.url, two.url]

        def start(mode: str, rounds: int, order: list[str]) -> subprocess.Popen:
            return subprocess.Popen([sys.executable, str(CLIENTS / "lock_race.py"), mode,
                                     str(rounds), *order], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)

        # The holder that is killed first: it takes the lock and never gives it back.
        victim = start("hold", 1, urls)
        line = ""
        with trio.fail_after(30):
            while not line.startswith("RACE "):
                line = await trio.to_thread.run_sync(victim.stdout.readline)
                assert line, victim.stderr.read()
        held = json.loads(line[5:])["holding"]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        victim.stdout.close()
        victim.stderr.close()
        others = [start("work", 4, urls), start("work", 4, urls[::-1]),
                  start("pause", 1, urls), start("work", 4, urls)]
        lines: list[dict] = []
        with trio.fail_after(55):
            for proc in others:
                out, err = await trio.to_thread.run_sync(proc.communicate)
                assert proc.returncode == 0, err[-3000:]
                lines.extend(json.loads(x[5:]) for x in out.splitlines()
                             if x.startswith("RACE "))
        commits = [x for x in lines if "success" in x]
        won = [x for x in commits if x["success"]]
        lost = [x for x in commits if not x["success"]]
        # The paused holder outlived its TTL while others held the lock: its commit is refused.
        assert lost and all(x["kvReason"] in ("version", "absent") for x in lost)
        r = await http.post(urls[0] + "/api/v1/kv", json={"operations": [
            {"op": "get", "ns": "race", "key": "counter"}]})
        counter = r.json()["results"][0]["value"]
        # The counter equals the guarded commits that answered success, none lost or doubled,
        # and in commit order the tokens never go down (strictly up from holder to holder).
        assert counter == len(won)
        assert sorted(x["wrote"] for x in won) == list(range(1, counter + 1))
        tokens = [x["token"] for x in sorted(won, key=lambda x: x["wrote"])]
        assert all(a < b for a, b in zip(tokens, tokens[1:], strict=False))
        assert held < tokens[0]  # the killed holder's permit expired; the next token is higher
