"""Route table: which handler answers which (method, path)."""

from __future__ import annotations

import trio

from .. import __version__, wire
from ..broker import Broker
from ..consume import acks
from ..consume.dlq import read_dead_letters
from ..consume.pop import parse_pop
from ..ops import traces
from ..push.parse import parse_push_body
from ..push.spool import directory_usage
from ..push.spool_root import directories
from ..push.transactions import parse_transaction
from ..queues.queues import parse_configure
from .app import App, Router
from .auth import ADMIN, PUBLIC, PUSH, READ, WRITE, Authenticator
from .dashboard import add_dashboard_routes
from .http import CORS_HEADERS, Request, Response, json_response
from .routes_ops import add_ops_routes

# What the official 2.6 client can call that this broker does not have (kv, locks, timers,
# offset reads, ephemeral queues, streams): 404 with code not_implemented, never a 5xx (which
# the client retries and counts against the broker's health). The 2.6 client reads a 404 on
# the ephemeral routes as "unsupported".
NOT_IN_THIS_BROKER: list[tuple[str, str]] = [
    ("POST", "/api/v1/kv"),
    ("POST", "/api/v1/locks"),
    ("POST", "/api/v1/timers"),
    ("GET", "/api/v1/timers/:queue"),
    ("GET", "/api/v1/timers/:queue/*timerKey"),
    ("DELETE", "/api/v1/timers/:queue/*timerKey"),
    ("POST", "/api/v1/fetch"),
    ("POST", "/api/v1/partitions/changed"),
    *(("POST", f"/api/v1/ephemeral/{verb}")
      for verb in ("configure", "reset", "push", "ack")),
    ("GET", "/api/v1/ephemeral/pop"),
    ("GET", "/api/v1/ephemeral/queues"),
    ("GET", "/api/v1/ephemeral/queues/:queue/depth"),
    ("DELETE", "/api/v1/ephemeral/queue/:queue"),
    ("POST", "/streams/v1/queries"),
    ("POST", "/streams/v1/cycle"),
    ("POST", "/streams/v1/state/get"),
]
PLAINTEXT_WARNING = "encryption key unusable: payloads are stored in plaintext"


def create_app(broker: Broker, auth: Authenticator | None = None) -> App:
    """The app for `broker`; `auth` defaults to one built from the broker's settings (the
    server passes one it has already started, so a bad JWKS refuses to boot)."""
    router = Router()
    auth = auth or Authenticator(broker.settings.auth)

    async def push(request: Request) -> Response:
        items = parse_push_body(request.body)
        status, results = await broker.publisher.push(items, request.subject)
        broker.activity.record_push(results)
        response = json_response(status, results)
        response.items = len(items)
        queues = {item.queue for item in items}
        response.queue = queues.pop() if len(queues) == 1 else None
        if status in (429, 503):
            # The clients back off on Retry-After: consumers free the space, the broker
            # catches up, the database comes back.
            response.headers.append((b"retry-after", b"1"))
        return response

    async def configure_queue(request: Request) -> Response:
        configure = parse_configure(request.json())
        reply = await broker.queues.configure(configure)
        if reply["options"]["encryptionEnabled"] and not broker.cipher.enabled:
            reply["warnings"] = [PLAINTEXT_WARNING]
        response = json_response(200, reply)
        response.queue = configure.queue
        return response

    async def health(request: Request) -> Response:
        healthy = await broker.db.ping()
        return json_response(200 if healthy else 503, {
            "status": "healthy" if healthy else "unhealthy",
            "database": "connected" if healthy else "disconnected",
            "server": "queen-trio",
            "version": __version__,
            "worker_id": broker.identity.worker_id,
        })

    async def pop(request: Request) -> Response:
        queue, partition = request.params.get("queue"), request.params.get("partition")
        req = parse_pop(request.query, broker.settings,
                        queue=None if queue is None else wire.name(queue, "queue"),
                        partition=None if partition is None else wire.name(partition, "partition"))
        delivery = await broker.consumer.pop(req, request.gone)
        broker.activity.record_pop(req.queue, None if delivery is None else delivery.reply)
        if delivery is None:
            return Response(204, b"", list(CORS_HEADERS), items=0)
        response = json_response(200, delivery.reply, items=len(delivery.reply["messages"]),
                                 queue=delivery.reply["queue"])
        response.undelivered = lambda: broker.consumer.release(delivery)
        return response

    async def ack_one(request: Request) -> Response:
        group, ack = acks.parse_single_ack(request.json())
        results = await broker.ack_lane.settle(group, [ack])
        broker.activity.record_acks([ack.status], results)
        return json_response(200, results, items=1)

    async def ack_batch(request: Request) -> Response:
        group, items = acks.parse_ack_batch(request.json())
        results = await broker.ack_lane.settle(group, items)
        broker.activity.record_acks([a.status for a in items], results)
        return json_response(200, results, items=len(items))

    async def extend_lease(request: Request) -> Response:
        lease_id = wire.parse_uuid(request.params["leaseId"], "leaseId")
        seconds = acks.parse_extend(request.json())
        return json_response(200, await acks.extend_lease(broker.db, lease_id, seconds))

    async def dead_letters(request: Request) -> Response:
        return json_response(200, await read_dead_letters(broker.db, broker.cipher,
                                                          request.query))

    async def remove_queue(request: Request) -> Response:
        name = wire.name(request.params["queue"], "queue")
        reply = await broker.queues.delete(name)
        broker.consumer.forget_queue(name)
        return json_response(200, reply)

    async def transaction(request: Request) -> Response:
        ops, leases = parse_transaction(request.body)
        reply = await broker.transactions.run(ops, leases, request.subject)
        broker.activity.record_transaction(
            [op.ack[1].status for op in ops if op.ack is not None], reply)
        return json_response(200, reply, items=len(ops))

    async def record_trace(request: Request) -> Response:
        return json_response(201, await traces.record(broker.db, request.json(),
                                                      worker_id=broker.identity.worker_id))

    async def trace_names(request: Request) -> Response:
        return json_response(200, await traces.names(broker.db, request.query))

    async def trace_by_name(request: Request) -> Response:
        return json_response(200, await traces.by_name(
            broker.db, broker.cipher, request.params["traceName"], request.query))

    async def trace_of_message(request: Request) -> Response:
        return json_response(200, await traces.by_message(
            broker.db, request.params["partitionId"], request.params["transactionId"]))

    router.add("POST", "/api/v1/traces", record_trace, access=WRITE)
    # Literal routes first: "names" and "by-name" are not partition ids.
    router.add("GET", "/api/v1/traces/names", trace_names, access=READ)
    router.add("GET", "/api/v1/traces/by-name/:traceName", trace_by_name, access=READ)
    router.add("GET", "/api/v1/traces/:partitionId/:transactionId", trace_of_message, access=READ)
    async def buffers(request: Request) -> Response:
        # This process's own from memory; other workers' directories from their files.
        spool = broker.spool
        own = spool.statistics()
        others = await trio.to_thread.run_sync(lambda: [
            directory_usage(d) for d in directories(spool.root) if d != spool.directory])
        reply: dict[str, object] = {
            "pending": own.pending + sum(u.pending for u in others),
            "failed": own.failed + sum(u.failed for u in others),
            "files": own.files + sum(u.files for u in others),
            "dbHealthy": await broker.db.ping(),
            "worker": broker.identity.worker_id}
        # Where the broker keeps its files is for admins only.
        if await auth.grants(request.headers, ADMIN):
            reply["directory"] = str(spool.directory.absolute())
            reply["directories"] = [
                {"directory": str(spool.directory.absolute()), "pending": own.pending,
                 "failed": own.failed, "files": own.files},
                *({"directory": str(u.directory.absolute()), "pending": u.pending,
                   "failed": u.failed, "files": u.files} for u in others)]
        return json_response(200, reply)

    async def retry_spool(request: Request) -> Response:
        requeued = await broker.spool.retry_failed()
        stats = broker.spool.statistics()
        return json_response(200, {"requeued": requeued, "pending": stats.pending,
                                   "failed": stats.failed})

    router.add("GET", "/api/v1/status/buffers", buffers, access=READ)
    router.add("POST", "/api/v1/status/buffers/retry", retry_spool, access=ADMIN)
    router.add("POST", "/api/v1/push", push, access=PUSH)
    router.add("POST", "/api/v1/transaction", transaction, access=WRITE)
    router.add("GET", "/api/v1/pop/queue/:queue", pop, access=WRITE, watch_disconnect=_waits)
    router.add("GET", "/api/v1/pop/queue/:queue/partition/:partition", pop, access=WRITE,
               watch_disconnect=_waits)
    router.add("GET", "/api/v1/pop", pop, access=WRITE, watch_disconnect=_waits)
    router.add("POST", "/api/v1/ack", ack_one, access=WRITE)
    router.add("POST", "/api/v1/ack/batch", ack_batch, access=WRITE)
    router.add("POST", "/api/v1/lease/:leaseId/extend", extend_lease, access=WRITE)
    router.add("GET", "/api/v1/dlq", dead_letters, access=READ)
    router.add("DELETE", "/api/v1/resources/queues/:queue", remove_queue, access=ADMIN)
    router.add("POST", "/api/v1/configure", configure_queue, access=WRITE)
    router.add("GET", "/health", health, access=PUBLIC)
    add_ops_routes(router, broker, auth)
    add_dashboard_routes(router)
    for method, template in NOT_IN_THIS_BROKER:
        router.add(method, template, _not_in_this_broker(method, template), access=PUBLIC)
    return App(router, auth, max_body_bytes=broker.settings.max_body_bytes,
               observe=broker.activity.record_request)


def _not_in_this_broker(method: str, template: str):  # type: ignore[no-untyped-def]
    async def handler(request: Request) -> Response:
        return json_response(404, {"error": f"{method} {template} is not implemented by this "
                                            "broker", "code": "not_implemented"})

    return handler


def _waits(request: Request) -> bool:
    """A pop that may park (a long poll) gets a watcher task, which cancels the parked wait
    when the client hangs up. One that does not wait is one claim and needs none: its
    request's `gone` (the connection's hang-up) still tells it to give back what it claims
    after the client left."""
    return wire.query_bool(request.query, "wait", False)
