"""The peer channel (queen_trio/ephemeral/channel.py, web/peer.py): relays between broker
processes as frames on kept-alive connections to the owner's peer listener, not HTTP."""

from __future__ import annotations

import signal

import httpx
import trio

from queen_trio.ephemeral.channel import MAGIC, Frames, RelayRequest, decode_reply, encode
from tests.support.processes import running_broker

FAST = {"QUEEN_EPHEMERAL_HEARTBEAT_MS": "200"}


async def owner_and_other(c: httpx.AsyncClient, a, b) -> tuple[str, str, str]:
    """The owner's url, the other's url, and the owner's peer address."""
    listed = (await c.get(a.url + "/api/v1/ephemeral/queues")).json()
    a_id = (await c.get(a.url + "/health")).json()["worker_id"]
    if listed["owner"].startswith(a_id + "/"):
        return a.url, b.url, listed["ownerAddress"]
    return b.url, a.url, listed["ownerAddress"]


async def peer_figures(c: httpx.AsyncClient, url: str) -> dict:
    eph = (await c.get(url + "/metrics")).json()["ephemeral"]
    return {**eph["peerChannel"], "waiting": eph["waiting"]}


async def test_relays_travel_the_channel_and_a_relayed_wait_whose_caller_leaves_ends(
        database_url):
    env = {"DATABASE_URL": database_url, **FAST}
    async with running_broker(env) as a, running_broker(env) as b, \
            httpx.AsyncClient(timeout=30) as c:
        owner, other, _ = await owner_and_other(c, a, b)
        before = await peer_figures(c, owner)
        pushed = await c.post(other + "/api/v1/ephemeral/push",
                              json={"queue": "ch.q", "messages": [{"payload": 1}]})
        assert pushed.status_code == 201 and pushed.json() == {"pushed": 1}
        popped = (await c.get(other + "/api/v1/ephemeral/pop",
                              params={"queue": "ch.q", "autoAck": "true"})).json()
        assert [m["payload"] for m in popped["messages"]] == [1]
        after = await peer_figures(c, owner)
        assert after["served"] - before["served"] == 2
        relaying = await peer_figures(c, other)
        assert relaying["connects"] >= 1 and relaying["idle"] >= 1
        # The relayed requests reused the kept-alive connection: one open at the owner.
        assert after["open"] == relaying["connects"] >= 1
        text = (await c.get(owner + "/metrics/prometheus")).text
        assert "queen_ephemeral_peer_served_total" in text

        # A waiting pop relayed to the owner, whose client hangs up: the owner stops
        # waiting for it, so the next message is not taken for nobody.
        async with trio.open_nursery() as nursery:
            async def wait_and_leave() -> None:
                async with httpx.AsyncClient(timeout=30) as leaving:
                    with trio.move_on_after(1.0):
                        await leaving.get(other + "/api/v1/ephemeral/pop", params={
                            "queue": "ch.w", "wait": "true", "timeout": "20000"})
                        raise AssertionError("the pop answered before its client left")
            nursery.start_soon(wait_and_leave)
        with trio.fail_after(20):
            while True:
                now = await peer_figures(c, owner)
                if now["abandoned"] == before["abandoned"] + 1 and now["waiting"] == 0:
                    break
                await trio.sleep(0.05)
        await c.post(other + "/api/v1/ephemeral/push",
                     json={"queue": "ch.w", "messages": [{"payload": "late"}]})
        got = (await c.get(other + "/api/v1/ephemeral/pop", params={"queue": "ch.w"})).json()
        assert [(m["payload"], m["attempts"]) for m in got["messages"]] == [("late", 1)]


async def test_only_members_relays_to_ephemeral_routes_are_served(database_url):
    env = {"DATABASE_URL": database_url, **FAST}
    async with running_broker(env) as a, running_broker(env) as b, \
            httpx.AsyncClient(timeout=30) as c:
        owner, _, address = await owner_and_other(c, a, b)
        host, _, port = address.rpartition(":")
        stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        frames = Frames(stream)

        async def ask(target: str, headers: dict[str, str], first: bool = False):
            request = encode(RelayRequest("GET", target, headers, b""))
            await frames.send((MAGIC if first else b"") + request)
            frame = await frames.receive()
            assert frame is not None
            return decode_reply(frame)

        # Not a member's relay (no member header, or a forged secret): 403.
        bare = await ask("/api/v1/ephemeral/queues", {}, first=True)
        assert bare.status == 403 and b"ephemeral_forbidden" in bare.body
        forged = await ask("/api/v1/ephemeral/queues",
                           {"x-queen-ephemeral-peer": "someone 0123"})
        assert forged.status == 403 and b"ephemeral_forbidden" in forged.body
        # A member's header on another route: 404 (the channel serves the ephemeral routes).
        members = (await c.get(owner + "/api/v1/ephemeral/queues")).json()
        assert members["owner"]
        other = await ask("/api/v1/resources/queues", {"x-queen-ephemeral-peer": "x y"})
        assert other.status == 404 and b"only the ephemeral routes" in other.body
        # Bytes that are not a frame end the connection, and the owner goes on serving.
        await frames.send(b"\x00\x00\x00\x03abc")
        with trio.fail_after(10):
            assert await frames.receive() is None
        await frames.aclose()
        # So does a frame announced bigger than an HTTP body may be: nothing is buffered for
        # it, whoever sends it (a frame is read before its sender is checked).
        stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        frames = Frames(stream)
        await frames.send(MAGIC + (1 << 29).to_bytes(4, "big"))
        with trio.fail_after(10):
            assert await frames.receive() is None
        await frames.aclose()
        assert (await c.get(owner + "/api/v1/ephemeral/queues")).status_code == 200
        # HTTP on the same port is still the peer listener's guarded HTTP.
        assert (await c.get(f"http://{address}/health")).status_code == 200


async def test_sigterm_answers_parked_ephemeral_pops_direct_and_relayed(database_url):
    # Two workers, a pop through each: one waits at the owner directly, the other through
    # a relay; both answer [] at the stop, not cut off at the graceful deadline.
    async with running_broker({"DATABASE_URL": database_url, **FAST}, workers=2) as server:
        replies: list[httpx.Response] = []

        async def long_poll(url: str) -> None:
            async with httpx.AsyncClient(timeout=120) as c:
                replies.append(await c.get(url + "/api/v1/ephemeral/pop", params={
                    "queue": "stop.q", "wait": "true", "timeout": "60000"}))

        async with httpx.AsyncClient(timeout=30) as c:
            urls = server.worker_urls
            async with trio.open_nursery() as nursery:
                for url in urls:
                    nursery.start_soon(long_poll, url)
                owner = (await c.get(urls[0] + "/api/v1/ephemeral/queues")).json()["owner"]
                ids = [(await c.get(u + "/health")).json()["worker_id"] for u in urls]
                (owner_url,) = [u for u, i in zip(urls, ids, strict=True)
                                if owner.startswith(i + "/")]
                with trio.fail_after(20):
                    while (await c.get(owner_url + "/metrics")).json()["ephemeral"][
                            "waiting"] < 2:
                        await trio.sleep(0.05)
                server.proc.send_signal(signal.SIGTERM)
        assert [(r.status_code, r.json()["messages"]) for r in replies] == [(200, []), (200, [])]
        assert await server.wait_exit() == 0
        assert "Traceback" not in server.output()
