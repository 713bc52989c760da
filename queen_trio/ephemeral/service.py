"""The ephemeral queues' service: the eight verbs over the engine, the declarations in
PostgreSQL, ownership, and the relay to the owner (docs/ephemeral.md)."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import attrs
import trio

from .. import wire
from ..errors import BadRequest, QueenError
from ..storage.database import Database
from ..storage.sql import Q
from .channel import ChannelPool, PeerUnreachable, RelayRequest
from .engine import DEFAULT_PARTITION, Delivered, Engine
from .options import bad_request, parse_options
from .owner import LOCK_KEY, OwnerInfo, Ownership

log = logging.getLogger("queen_trio.ephemeral")

PEER_HEADER = b"x-queen-ephemeral-peer"
MAX_BATCH = 10_000
MAX_TIMEOUT_MS = 300_000
DEFAULT_TIMEOUT_MS = 30_000
# A relayed request's deadline beyond its own (a waiting pop: its timeout plus this).
RELAY_SLACK_SECONDS = 5.0
RELAY_TIMEOUT_SECONDS = 30.0
# Request headers a relay carries to the owner (the caller's credentials among them).
RELAYED_HEADERS = (b"authorization", b"content-type", b"accept")


class Unavailable(QueenError):
    """503 ephemeral_unavailable: no owner reachable, the RAM budget, no database."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message, code="ephemeral_unavailable", reason=reason)


class Forbidden(QueenError):
    """403: a forward from a process that is not a member."""


@attrs.frozen
class Relayed:
    """The owner's answer to a relayed request, passed back as it came."""

    status: int
    body: bytes
    retry_after: bytes | None


@attrs.define
class ChannelServed:
    """The owner's side of the peer channel (web/peer.py), counted here for /metrics."""

    open: int = 0       # channel connections open to this process now
    served: int = 0     # relayed requests answered over the channel
    abandoned: int = 0  # relayed requests whose relaying process left before the answer


@attrs.frozen
class EphemeralStatistics:
    owner: bool
    queues: int
    messages: int
    bytes: int
    pushed: int
    popped: int
    acked: int
    drops: dict[str, int]
    relayed: int
    relay_failures: int
    channel_connects: int  # peer-channel connections this process opened to an owner
    channel_idle: int      # of them, idle in its pool now
    channel_open: int      # peer-channel connections open to this process
    channel_served: int
    channel_abandoned: int
    waiting: int
    per_queue: list[dict[str, Any]]


class Ephemeral:
    """This process's side of the ephemeral surface."""

    def __init__(self, db: Database, url: str, *, member_id: str, address: str | None,
                 max_bytes: int, interval: float) -> None:
        self.db = db
        self.engine = Engine(max_bytes=max_bytes)
        self.ownership = Ownership(url, member_id, address, interval=interval,
                                   on_gain=self._gained, on_loss=self._lost)
        self._owner: OwnerInfo | None = None
        self._members: dict[str, str] = {}
        self.channel = ChannelPool()
        self._stopping = False
        self._parked: set[trio.CancelScope] = set()
        self.relayed = 0
        self.relay_failures = 0
        self.served = ChannelServed()

    # -- task tree -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.ownership.run)
                nursery.start_soon(self._sweep)
                task_status.started()
        finally:
            await self.channel.aclose()
            await self.ownership.leave(lambda: self.db.execute(
                Q.ephemeral_leave, member_id=self.ownership.member_id))

    async def _sweep(self) -> None:
        while True:
            await trio.sleep(0.25)
            if self.ownership.owner:
                self.engine.sweep()

    async def _gained(self, incarnation: str) -> None:
        self.engine.clear()
        rows = await self.db.fetch(Q.ephemeral_declarations)
        for row in rows:
            try:
                self.engine.declare(row["queue"], parse_options(json.loads(row["options"])))
            except QueenError:
                log.warning("a stored ephemeral declaration is not valid; skipped",
                            extra={"queue": row["queue"]})

    def _lost(self) -> None:
        self.engine.clear()
        self._owner = None

    def stop_waiting(self) -> None:
        self._stopping = True
        for scope in self._parked:
            scope.cancel()

    # -- who serves a request ----------------------------------------------------------

    @property
    def owner(self) -> bool:
        return self.ownership.owner

    async def check_peer(self, header: bytes) -> None:
        """A forwarded request: from a member, or Forbidden."""
        member, _, secret = header.decode("latin-1").partition(" ")
        known = self._members.get(member)
        if known is None:
            known = await self.db.fetchval(Q.ephemeral_member_secret, member_id=member)
            if known is not None:
                self._members[member] = known
        if known is None or not secrets_equal(known, secret):
            raise Forbidden("forwarded by a process that is not a member",
                            code="ephemeral_forbidden")

    async def owner_info(self, *, fresh: bool = False) -> OwnerInfo | None:
        if self._owner is None or fresh:
            row = await self.db.fetchrow(Q.ephemeral_owner, lock_key=LOCK_KEY)
            self._owner = None if row is None else OwnerInfo(
                row["member_id"], row["address"], row["incarnation"], row["since"])
        return self._owner

    async def relay(self, method: str, path_and_query: str, headers: dict[bytes, bytes],
                    body: bytes, *, wait_seconds: float = 0.0) -> Relayed:
        """The request, answered by the owner. One retry after the owner changed; 503 when no
        owner can be reached."""
        sent = {k.decode(): v.decode("latin-1") for k, v in headers.items()
                if k in RELAYED_HEADERS}
        sent[PEER_HEADER.decode()] = f"{self.ownership.member_id} {self.ownership.secret}"
        request = RelayRequest(method, path_and_query, sent, body)
        timeout = (wait_seconds + RELAY_SLACK_SECONDS) if wait_seconds else RELAY_TIMEOUT_SECONDS
        for attempt in range(3):
            info = await self.owner_info(fresh=attempt > 0)
            if info is None or info.member_id == self.ownership.member_id:
                # Nobody holds the lock (the owner just died), or we hold it and our own
                # loop has not said so yet: try it now and look again.
                self.ownership.poke()
                with trio.move_on_after(self.ownership.interval * 2):
                    await self.ownership.next_beat()
                if self.owner:
                    return Relayed(0, b"", None)  # serve it here
                continue
            if info.address is None:
                raise Unavailable("the ephemeral owner has no address its peers can reach "
                                  "(QUEEN_ADVERTISE_ADDRESS)", "owner_unreachable")
            try:
                response = await self.channel.request(info.address, request,
                                                      within=timeout)
            except PeerUnreachable:
                self.relay_failures += 1
                self._owner = None
                self.ownership.poke()
                with trio.move_on_after(self.ownership.interval * 2):
                    await self.ownership.next_beat()
                if self.owner:
                    return Relayed(0, b"", None)
                continue
            if response.status == 503 and b"owner_moved" in response.body:
                self._owner = None
                continue
            self.relayed += 1
            return Relayed(response.status, response.body, response.retry_after)
        raise Unavailable("no process owns the ephemeral queues right now; retry",
                          "no_owner")

    # -- the verbs (on the owner) ------------------------------------------------------

    async def configure(self, body: Any) -> dict[str, Any]:
        body = _object(body)
        queue = queue_name(body.get("queue"))
        raw = body.get("options", {})
        options = parse_options(raw)
        stored = {k: v for k, v in (raw or {}).items() if v is not None}
        await self.db.execute(Q.ephemeral_declare, queue=queue, options=json.dumps(stored))
        self.engine.declare(queue, options)
        return {"queue": queue, "declared": True, "tier": "declared",
                "options": options.to_wire()}

    async def reset(self, body: Any) -> dict[str, Any]:
        queue = queue_name(_object(body).get("queue"))
        return {"queue": queue, "dropped": self.engine.reset(queue)}

    async def delete(self, queue: str) -> dict[str, Any]:
        queue = queue_name(queue)
        deleted = self.engine.delete(queue)
        declared = await self.db.fetchval(Q.ephemeral_undeclare, queue=queue) is not None
        return {"queue": queue, "deleted": deleted or declared, "declared": declared}

    def push(self, body: Any) -> dict[str, Any]:
        queue, partition, payloads = parse_push(body)
        return {"pushed": self.engine.push(queue, partition, payloads)}

    async def pop(self, query: dict[str, str]) -> tuple[str, str, list[Delivered]]:
        """The pop's queue, group and what it took. Cancelled while it waits (its client hung
        up), it gives back what it had taken, unless autoAck (at most once)."""
        queue = queue_name(query.get("queue"))
        partition = query.get("partition")
        if partition is not None:
            partition = partition_name(partition)
        group = group_name(query.get("group"))
        batch = wire.query_int(query, "batch", 1, minimum=1, maximum=MAX_BATCH)
        wait = wire.query_bool(query, "wait", False)
        timeout_ms = wire.query_int(query, "timeout", DEFAULT_TIMEOUT_MS, minimum=0,
                                    maximum=MAX_TIMEOUT_MS)
        auto_ack = wire.query_bool(query, "autoAck", False)
        engine = self.engine
        taken = engine.take(queue, partition, group, batch, auto_ack=auto_ack)
        if not wait or self._stopping:
            return queue, group, taken
        deadline = trio.current_time() + timeout_ms / 1000
        options = engine.queue(queue).options
        with trio.CancelScope() as parked:
            self._parked.add(parked)
            try:
                while not taken:
                    if not await self._wait_change(queue, partition, deadline):
                        break
                    taken = engine.take(queue, partition, group, batch, auto_ack=auto_ack)
                # windowBuffer: a pop that has something may wait a little to fill its batch.
                if taken and len(taken) < batch and (options.window_ms or options.window_count):
                    want = min(batch, options.window_count or batch)
                    until = min(deadline, trio.current_time() + options.window_ms / 1000
                                ) if options.window_ms else deadline
                    while len(taken) < want:
                        if not await self._wait_change(queue, partition, until):
                            break
                        taken += engine.take(queue, partition, group, batch - len(taken),
                                             auto_ack=auto_ack)
            except BaseException:
                if not auto_ack:
                    engine.give_back(taken, group)
                raise
            finally:
                self._parked.discard(parked)
        return queue, group, taken

    async def _wait_change(self, queue: str, partition: str | None, deadline: float) -> bool:
        """False at the deadline; True when the ring (or any ring of the queue) changed."""
        q = self.engine.queue(queue)
        event = self.engine.ring(q, partition).changed if partition is not None else q.changed
        with trio.move_on_at(deadline):
            await event.wait()
            return True
        return False

    def ack(self, body: Any) -> dict[str, Any]:
        body = _object(body)
        queue = queue_name(body.get("queue"))
        group = group_name(body.get("group"))
        acks = body.get("acks")
        if not isinstance(acks, list):
            raise bad_request("acks must be an array of {id, status?}")
        checked: list[tuple[str, str]] = []
        for i, entry in enumerate(acks):
            if isinstance(entry, str):
                entry = {"id": entry}
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                raise bad_request(f"acks[{i}] must be an object with a string id")
            status = entry.get("status", "completed")
            if status is True:
                status = "completed"
            elif status is False:
                status = "failed"
            if status not in ("completed", "failed", "retry"):
                raise bad_request(f"acks[{i}].status must be completed, failed or retry")
            checked.append((entry["id"], status))
        results = [{"id": mid, "outcome": self.engine.ack(queue, group, mid, status)}
                   for mid, status in checked]
        return {"results": results}

    def queues(self) -> dict[str, Any]:
        self.engine.sweep()
        listed = [self.engine.describe(q) for q in sorted(self.engine.queues.values(),
                                                           key=lambda q: q.name)]
        return {"queues": listed, "count": len(listed), "cellBytes": 96,
                "owner": self.ownership.member_id, "ownerAddress": self.ownership.address,
                "incarnation": self.ownership.incarnation,
                "budget": {"maxBytes": self.engine.max_bytes,
                           "usedBytes": self.engine.total_bytes}}

    def depth(self, queue: str, group: str | None) -> dict[str, Any] | None:
        q = self.engine.queues.get(queue_name(queue))
        if q is None:
            return None
        return self.engine.depth(q, None if group is None else group_name(group))

    # -- figures -------------------------------------------------------------------------

    def statistics(self) -> EphemeralStatistics:
        e = self.engine
        per_queue: list[dict[str, Any]] = [
            {"queue": q.name, "depth": q.length(), "bytes": q.bytes(), "pushed": q.pushed,
             "popped": q.popped, "drops": dict(q.drops)} for q in e.queues.values()]
        return EphemeralStatistics(
            owner=self.owner, queues=len(e.queues),
            messages=sum(q.length() for q in e.queues.values()),
            bytes=e.total_bytes, pushed=e.pushed, popped=e.popped, acked=e.acked,
            drops=dict(e.drops), relayed=self.relayed, relay_failures=self.relay_failures,
            channel_connects=self.channel.connects, channel_idle=self.channel.idle(),
            channel_open=self.served.open, channel_served=self.served.served,
            channel_abandoned=self.served.abandoned,
            waiting=len(self._parked), per_queue=per_queue)


def secrets_equal(a: str, b: str) -> bool:
    import hmac

    return hmac.compare_digest(a.encode(), b.encode())


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


def _name(value: Any, label: str) -> str:
    if not isinstance(value, str) or not value:
        raise bad_request(f"{label} must be a non-empty string")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise bad_request(f"{label} must not contain control characters")
    try:
        return wire.name(value, label)
    except BadRequest as exc:
        raise bad_request(str(exc)) from None


def queue_name(value: Any) -> str:
    return _name(value, "queue")


def partition_name(value: Any) -> str:
    return _name(value, "partition")


def group_name(value: Any) -> str:
    if value is None or value == "":
        return wire.QUEUE_MODE
    return _name(value, "group")


def parse_push(body: Any) -> tuple[str, str, list[bytes]]:
    """queue, partition, and each payload as compact JSON bytes. A message without a payload
    is a null payload (a buffered producer resends a refused batch forever: keep 400s for
    bodies that cannot be read at all)."""
    body = _object(body)
    queue = queue_name(body.get("queue"))
    partition = body.get("partition")
    partition = DEFAULT_PARTITION if partition is None else partition_name(partition)
    messages = body.get("messages", [])
    if not isinstance(messages, list):
        raise bad_request("messages must be an array")
    if len(messages) > MAX_BATCH:
        raise bad_request(f"at most {MAX_BATCH} messages per push")
    payloads = []
    for message in messages:
        payload = message.get("payload") if isinstance(message, dict) else message
        payloads.append(wire_bytes(payload))
    return queue, partition, payloads


def wire_bytes(value: Any) -> bytes:
    import msgspec

    if isinstance(value, float) and not math.isfinite(value):
        return b"null"
    return msgspec.json.encode(value)

