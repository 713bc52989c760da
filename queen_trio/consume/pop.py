"""Pops: parameters, the claim, the reply (payload bytes spliced verbatim), long polling.

The rules a pop follows between the claim and the reply (decoding, dead-letter cuts, the
reply's shape, how long a long poll parks) are pure functions in consume/delivery.py."""

from __future__ import annotations

import datetime as dt
import logging
from collections import OrderedDict
from contextlib import ExitStack
from typing import Any

import asyncpg
import attrs
import trio

from .. import ids, wire
from ..errors import BadRequest, DatabaseUnavailable
from ..settings import Settings
from ..storage.database import Database
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q, Row
from ..wire import QUEUE_MODE, query_bool, query_int
from .delivery import (
    Decoded,
    Delivery,
    LeaseId,
    PopRequest,
    Runs,
    assemble_reply,
    dead_letter_plan,
    decode_claim,
    empty_conflation_reply,
    park_seconds,
)
from .diagnosis import why_nothing
from .fusion import CallFusion, Fusable, FusionStatistics
from .wakeups import WakeRegistry

log = logging.getLogger("queen_trio.pop")

MAX_BATCH = 10_000
MAX_PARTITIONS = 1_000
MAX_TIMEOUT_MS = 3_600_000
# How many (queue, group) pairs the consumer remembers as joined (least recently used go).
MAX_JOINED_GROUPS = 10_000

_START_MODES = {"": "all", "all": "all", "from_beginning": "all",
                "new": "new", "new-only": "new", "now": "new"}


@attrs.frozen
class ConsumerStatistics:
    joined_groups: int  # (queue, group) pairs known to have joined: their claims fuse
    claims: FusionStatistics
    undecodable: int    # claimed messages dead-lettered because they could not be decoded
    released: int       # leases given back because the reply could not be sent
    parked: int         # long polls waiting right now
    superseded: int = 0  # messages a conflating group's claims moved the cursor past


def parse_pop(query: dict[str, str], settings: Settings, *, queue: str | None = None,
              partition: str | None = None) -> PopRequest:
    namespace = query.get("namespace") or None
    task = query.get("task") or None
    if queue is None and namespace is None and task is None:
        raise BadRequest("namespace or task is required")
    autopilot = query_bool(query, "autopilot", False)
    batch_given = "batch" in query
    batch = query_int(query, "batch", settings.default_batch_size, minimum=1, maximum=MAX_BATCH)
    partitions_given = "partitions" in query
    partitions = query_int(query, "partitions", 1, minimum=1, maximum=MAX_PARTITIONS)
    if autopilot:
        # The broker sizes what the client left out (docs/decisions.md#batch-size-and-autopilot).
        if not batch_given:
            batch = 100
        if not partitions_given and partition is None:
            partitions = 10
    if partition is not None:
        partitions = 1
    group = wire.consumer_group(query.get("consumerGroup"))
    mode_text = query.get("subscriptionMode", settings.default_subscription_mode)
    start_from_text = query.get("subscriptionFrom") or None
    start_mode = _START_MODES.get(mode_text.lower())
    start_from = None
    if start_mode is None:
        # An ISO timestamp is also accepted in subscriptionMode.
        start_from, start_mode = wire.parse_timestamp(mode_text, "subscriptionMode"), "from"
    if start_from_text is not None:
        if start_from_text.lower() == "now":
            start_mode = "new"
        else:
            start_from, start_mode = (wire.parse_timestamp(start_from_text, "subscriptionFrom"),
                                      "from")
    if group == QUEUE_MODE:
        start_mode, start_from = "all", None  # queue mode always starts at the beginning
    auto_ack = query_bool(query, "autoAck", False)
    conflation = query_bool(query, "conflation", False) if "conflation" in query else None
    if conflation:
        # docs/decisions.md#conflation: a group's policy, which commits only with a lease.
        if auto_ack:
            raise BadRequest("conflation cannot be combined with autoAck: a conflating pop "
                             "leases the newest message of each partition",
                             code="conflation_with_auto_ack")
        if group == QUEUE_MODE:
            raise BadRequest("conflation needs a consumerGroup: it is a consumer group's "
                             "policy", code="conflation_without_group")
    return PopRequest(
        queue=queue, partition=partition, namespace=namespace, task=task, group=group,
        batch=batch, partitions=partitions,
        wait=query_bool(query, "wait", False),
        timeout_ms=query_int(query, "timeout", settings.default_timeout_ms, minimum=0,
                             maximum=MAX_TIMEOUT_MS),
        auto_ack=auto_ack,
        start_mode=start_mode, start_from=start_from, autopilot=autopilot,
        conflation=conflation,
    )


@attrs.define(eq=False)
class _ClaimRequest(Fusable):
    """One queue's claim within a pop attempt, fused with others: its outcome is `decoded`."""

    req: PopRequest
    lease_id: LeaseId
    gone: trio.Event
    decoded: Decoded | None = None


class Consumer:
    def __init__(self, db: Database, cipher: PayloadCipher, wakeups: WakeRegistry,
                 settings: Settings, *, max_joined: int = MAX_JOINED_GROUPS) -> None:
        self._db = db
        self._max_joined = max_joined
        self._cipher = cipher
        self._wakeups = wakeups
        self._settings = settings
        # Claims of groups that joined their queue share pop_many calls; a group's first
        # contact (it may lock the queue row to join) goes alone through pop_claim.
        self.claims = CallFusion[_ClaimRequest](
            self._claim_many, deadline_seconds=settings.call_deadline_seconds, hold=db.holding)
        # (queue, group) pairs known to have joined, least recently used first.
        self._joined: OrderedDict[tuple[str | None, str], None] = OrderedDict()
        self._undecodable = 0
        self._released = 0
        self._superseded = 0
        # Shutdown: parked long polls answer 204 at once, and new ones do not park.
        self._stopping = False
        self._parked: set[trio.CancelScope] = set()

    def forget_queue(self, queue: str) -> None:
        """The queue was deleted: its groups join again if it comes back."""
        for key in [key for key in self._joined if key[0] == queue]:
            del self._joined[key]

    def forget_joined_groups(self) -> None:
        """Forget which groups joined which queues: the next claim of each goes alone again
        (after a test broker's reset, the queues they joined are gone)."""
        self._joined.clear()

    def statistics(self) -> ConsumerStatistics:
        return ConsumerStatistics(joined_groups=len(self._joined),
                                  claims=self.claims.statistics(),
                                  undecodable=self._undecodable, released=self._released,
                                  parked=len(self._parked), superseded=self._superseded)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.claims.run(task_status=task_status)

    # -- claiming and decoding, on the database's side of the bridge ---------------------

    async def _claim_many(self, batch: list[_ClaimRequest]) -> None:
        async def work(conn: asyncpg.Connection) -> None:
            # A consumer that hung up before the claim takes nothing.
            live = [request for request in batch if not request.gone.is_set()]
            if not live:
                return

            def column(key: str) -> list[Any]:
                return [self._claim_args(request.req, request.lease_id)[key]
                        for request in live]

            rows = await Q.pop_many.fetch(
                conn, queues=column("queue"), partitions=column("partition"),
                consumer_groups=column("consumer_group"), batches=column("batch"),
                max_partitions=column("max_partitions"), lease_ids=column("lease_id"),
                auto_acks=column("auto_ack"), start_modes=column("start_mode"),
                start_froms=column("start_from"), conflations=column("conflation"))
            per_request: list[list[asyncpg.Record]] = [[] for _ in live]
            for row in rows:
                per_request[row["request_no"] - 1].append(row)
            # The claims are committed: from here on a failure is the request's own, never
            # a reason to split and claim again.
            for request, own in zip(live, per_request, strict=True):
                try:
                    request.decoded = await self._deliverable(
                        conn, request.req, request.lease_id,
                        [(request.req.queue, row) for row in own])
                except Exception as exc:
                    request.failure = exc

        await self._db.call(work)

    @staticmethod
    def _claim_args(req: PopRequest, lease_id: LeaseId) -> dict[str, Any]:
        return {"queue": req.queue, "partition": req.partition, "consumer_group": req.group,
                "batch": req.batch, "max_partitions": req.partitions, "lease_id": lease_id,
                "auto_ack": req.auto_ack, "start_mode": req.start_mode,
                "start_from": req.start_from, "conflation": req.conflation}

    async def _claim(self, req: PopRequest, lease_id: LeaseId, gone: trio.Event) -> Decoded:
        """Claim and decode in one bridge crossing: fused with other pops once the group has
        joined the queue; alone (pop_claim, or pop_namespace) otherwise."""
        key = (req.queue, req.group)
        if req.queue is not None and key in self._joined:
            self._joined.move_to_end(key)
            request = _ClaimRequest(req, lease_id, gone)
            await self.claims.submit(request)
            return request.decoded or Decoded()

        async def work(conn: asyncpg.Connection) -> Decoded:
            if gone.is_set():
                return Decoded()
            if req.queue is None:
                rows = await Q.pop_namespace.fetch(
                    conn, namespace=req.namespace, task=req.task, consumer_group=req.group,
                    batch=req.batch, max_partitions=req.partitions, lease_id=lease_id,
                    auto_ack=req.auto_ack, start_mode=req.start_mode,
                    start_from=req.start_from, conflation=req.conflation)
                runs: list[tuple[str | None, Row]] = [(row["queue_name"], row) for row in rows]
            else:
                rows = await Q.pop_claim.fetch(conn, **self._claim_args(req, lease_id))
                runs = [(req.queue, row) for row in rows]
            return await self._deliverable(conn, req, lease_id, runs)

        decoded = await self._db.call(work)
        if req.queue is not None and decoded.found:
            # The queue exists, so the group has joined it.
            self._joined[key] = None
            if len(self._joined) > self._max_joined:
                self._joined.popitem(last=False)
        return decoded

    async def _deliverable(self, conn: asyncpg.Connection, req: PopRequest, lease_id: LeaseId,
                           runs: Runs) -> Decoded:
        """Decode the claimed rows; dead-letter what cannot be decoded before anything is
        answered, so no claim outlives its delivery."""
        decoded = decode_claim(runs, req, "" if req.auto_ack else str(lease_id),
                               self._cipher.decrypt)
        if decoded.bad:
            try:
                decoded = await self._dead_letter(conn, req, lease_id, decoded)
            except Exception as exc:
                # The double fault: leased messages come back when the lease expires; an
                # autoAck cursor is already past these, so name them for the operator.
                log.error("undecodable claimed messages could not be dead-lettered",
                          extra={"consumer_group": req.group, "auto_ack": req.auto_ack,
                                 "messages": [(str(b.partition_id), b.offset)
                                              for b in decoded.bad],
                                 "error": str(exc)})
                raise
        return decoded

    async def _dead_letter(self, conn: asyncpg.Connection, req: PopRequest, lease_id: LeaseId,
                           decoded: Decoded) -> Decoded:
        """Dead-letter the undecodable messages of one claim, for its group (which ones, and
        what is delivered then: delivery.dead_letter_plan)."""
        plan = dead_letter_plan(decoded.offsets, decoded.bad, auto_ack=req.auto_ack)
        bad = plan.dead
        written = await Q.dead_letter_undecodable.fetchval(
            conn, consumer_group=req.group, lease_id=None if req.auto_ack else lease_id,
            cut_partitions=list(plan.cuts), cursors=[c.cursor for c in plan.cuts.values()],
            untils=[c.until for c in plan.cuts.values()],
            partition_ids=[b.partition_id for b in bad], offsets=[b.offset for b in bad],
            message_ids=[b.message_id for b in bad],
            transaction_ids=[b.transaction_id for b in bad], errors=[b.reason for b in bad])
        self._undecodable += written
        log.warning("claimed messages could not be decoded; dead-lettered for the group",
                    extra={"consumer_group": req.group, "count": written,
                           "reasons": sorted({b.reason for b in bad})})
        return decoded.delivering(plan.keep, written)

    # -- the pop ----------------------------------------------------------------------------

    def stop_waiting(self) -> None:
        """The broker is stopping: answer every parked long poll now, park no new one."""
        self._stopping = True
        for scope in self._parked:
            scope.cancel()

    async def pop(self, req: PopRequest, gone: trio.Event | None = None) -> Delivery | None:
        """The delivery, or None for 204. Parks while `wait` and nothing is deliverable.

        `gone` is set when the consumer hangs up: a parked pop then stops without claiming
        (its caller cancels the wait), and a claim that lands after it is given back."""
        seen: list[Decoded] = []
        if req.wait and self._stopping:
            delivery = None
        else:
            delivery = await self._pop(req, trio.Event() if gone is None else gone, seen)
        if delivery is None and req.conflation is not None:
            # A pop that stated a conflation policy answers 200 with its echo, never 204
            # (docs/decisions.md#conflation).
            return empty_conflation_reply(req, seen[-1] if seen else Decoded())
        if delivery is None and log.isEnabledFor(logging.DEBUG):
            # Only at debug: it costs a query.
            log.debug("pop found nothing", extra={
                "queue": req.queue, "partition": req.partition, "namespace": req.namespace,
                "task": req.task, "consumerGroup": req.group,
                "why": await why_nothing(self._db, req.queue, req.partition, req.namespace,
                                         req.task, req.group)})
        return delivery

    async def _pop(self, req: PopRequest, gone: trio.Event,
                   seen: list[Decoded]) -> Delivery | None:
        """The delivery, or None; `seen` gets each look's decoded claim."""
        deadline = trio.current_time() + req.timeout_ms / 1000
        empty_checks = 0
        with ExitStack() as parking:
            while not gone.is_set():
                with self._wakeups.watch(req.queue) as wake:
                    delivery, decoded = await self._attempt(req, gone)
                    seen[:] = [decoded]
                    if delivery is None and decoded.dead_lettered:
                        continue  # dead letters moved the cursor: look again at once
                    if delivery is not None or not req.wait or self._stopping:
                        return delivery
                    now = trio.current_time()
                    if now >= deadline:
                        return None
                    empty_checks += 1
                    if empty_checks == 1:
                        parking.enter_context(self._wakeups.parked(req.queue))
                    park = park_seconds(empty_checks, self._settings, decoded.next_check,
                                        dt.datetime.now(dt.timezone.utc))
                    with trio.move_on_at(min(deadline, now + park)) as parked:
                        self._parked.add(parked)
                        try:
                            await wake.wait()
                        finally:
                            self._parked.discard(parked)
                if self._stopping:
                    return None
        return None

    async def _attempt(self, req: PopRequest, gone: trio.Event
                       ) -> tuple[Delivery | None, Decoded]:
        """One look: claim, decode, answer. A claim lands or fails whole: cancelling its
        caller never strands it, and one that lands after a hang-up is given back."""
        lease_id = ids.new_id()
        with trio.CancelScope(shield=True) as claiming:
            claiming.deadline = trio.current_time() + self._settings.call_deadline_seconds
            decoded = await self._claim(req, lease_id, gone)
            self._superseded += decoded.superseded
            delivery = assemble_reply(req, lease_id, decoded)
            if delivery is not None and gone.is_set():
                await self.release(delivery)
                delivery = None
        if claiming.cancelled_caught:
            raise DatabaseUnavailable("the claim took longer than its deadline")
        return delivery, decoded

    async def release(self, delivery: Delivery) -> None:
        """Give back a delivery that never reached its consumer: shielded, under a deadline,
        counting no failed delivery. An autoAck delivery is gone already (at most once)."""
        if delivery.lease_id is None:
            return
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + self._settings.call_deadline_seconds
            try:
                rows = await self._db.fetch(Q.release_lease, lease_id=delivery.lease_id)
            except Exception as exc:
                log.warning("could not give back an undelivered lease; it expires instead",
                            extra={"lease_id": str(delivery.lease_id), "error": str(exc)})
                return
            self._released += 1
            for row in rows:
                self._wakeups.notify(row["queue_name"])
        if scope.cancelled_caught:
            log.warning("giving back an undelivered lease timed out; it expires instead",
                        extra={"lease_id": str(delivery.lease_id)})
