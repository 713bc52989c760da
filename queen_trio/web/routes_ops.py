"""Routes of the operations room: resources, consumer groups, messages, status, analytics,
metrics (docs/api.md). Handlers parse nothing themselves beyond the path: the ops services do.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from ..broker import Broker
from ..ops import analytics, groups, messages, metrics, resources, status
from ..storage.database import Database
from .app import Handler, Router
from .auth import ADMIN, PUBLIC, READ, WRITE, Authenticator
from .http import CORS_HEADERS, Request, Response, json_response

log = logging.getLogger("queen_trio.http")


def add_ops_routes(router: Router, broker: Broker, auth: Authenticator) -> None:
    db = broker.db

    # -- resources ---------------------------------------------------------------------------

    async def overview(request: Request) -> Response:
        return json_response(200, await resources.overview(db, stats_age=broker.stats_age()))

    async def list_queues(request: Request) -> Response:
        queues, page = await resources.list_queues(db, request.query)
        return json_response(200, {"queues": queues, "pagination": page.to_wire()})

    async def queue_detail(request: Request) -> Response:
        return json_response(200, await resources.queue_detail(db, request.params["queue"]))

    async def queue_depth(request: Request) -> Response:
        return json_response(200, await resources.depth(db, request.params["queue"],
                                                        request.query.get("group")))

    async def partitions(request: Request) -> Response:
        return json_response(200, await resources.partitions(db, request.query))

    async def namespaces(request: Request) -> Response:
        return json_response(200, await resources.namespaces(db, "namespace"))

    async def tasks(request: Request) -> Response:
        return json_response(200, await resources.namespaces(db, "task"))

    router.add("GET", "/api/v1/resources/overview", overview, access=READ)
    router.add("GET", "/api/v1/resources/queues", list_queues, access=READ)
    router.add("GET", "/api/v1/resources/queues/:queue/depth", queue_depth, access=READ)
    router.add("GET", "/api/v1/resources/queues/:queue", queue_detail, access=READ)
    router.add("GET", "/api/v1/resources/partitions", partitions, access=READ)
    router.add("GET", "/api/v1/resources/namespaces", namespaces, access=READ)
    router.add("GET", "/api/v1/resources/tasks", tasks, access=READ)

    # -- consumer groups ---------------------------------------------------------------------

    async def list_groups(request: Request) -> Response:
        return json_response(200, await groups.list_groups(db))

    async def lagging(request: Request) -> Response:
        return json_response(200, await groups.lagging(db, request.query))

    async def group_detail(request: Request) -> Response:
        return json_response(200, await groups.group_detail(db, request.params["group"]))

    async def delete_group(request: Request) -> Response:
        return json_response(200, await groups.delete_group(db, request.params["group"],
                                                            request.query))

    async def delete_group_queue(request: Request) -> Response:
        return json_response(200, await groups.delete_group(
            db, request.params["group"], request.query, queue=request.params["queue"]))

    async def subscription(request: Request) -> Response:
        return json_response(200, await groups.update_subscription(
            db, request.params["group"], request.json()))

    async def seek_queue(request: Request) -> Response:
        return json_response(200, await groups.seek(
            db, broker.wakeups, request.params["group"], request.params["queue"],
            request.json()))

    async def seek_partition(request: Request) -> Response:
        return json_response(200, await groups.seek(
            db, broker.wakeups, request.params["group"], request.params["queue"],
            request.json(), partition=request.params["partition"]))

    # Literal before parameter: "lagging" is not a group name here.
    router.add("GET", "/api/v1/consumer-groups", list_groups, access=READ)
    router.add("GET", "/api/v1/consumer-groups/lagging", lagging, access=READ)
    router.add("GET", "/api/v1/consumer-groups/:group", group_detail, access=READ)
    router.add("DELETE", "/api/v1/consumer-groups/:group", delete_group, access=ADMIN)
    router.add("DELETE", "/api/v1/consumer-groups/:group/queues/:queue", delete_group_queue,
               access=ADMIN)
    router.add("POST", "/api/v1/consumer-groups/:group/subscription", subscription,
               access=WRITE)
    router.add("POST", "/api/v1/consumer-groups/:group/queues/:queue/seek", seek_queue,
               access=WRITE)
    router.add("POST", "/api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek",
               seek_partition, access=WRITE)

    # -- messages ----------------------------------------------------------------------------

    async def list_messages(request: Request) -> Response:
        return json_response(200, await messages.list_messages(
            db, messages.parse_list(request.query)))

    async def get_message(request: Request) -> Response:
        return json_response(200, await messages.get_message(
            db, broker.cipher, request.params["partitionId"], request.params["transactionId"]))

    async def queue_messages(request: Request) -> Response:
        return json_response(200, await messages.queue_messages(
            db, request.params["queue"], request.query))

    async def delete_message(request: Request) -> Response:
        return json_response(200, await messages.delete_message(
            db, broker.wakeups, request.params["partitionId"], request.params["transactionId"]))

    async def retry_message(request: Request) -> Response:
        return json_response(200, await messages.retry_message(
            db, broker.cipher, broker.wakeups, request.params["partitionId"],
            request.params["transactionId"], request.query))

    router.add("GET", "/api/v1/messages", list_messages, access=READ)
    router.add("GET", "/api/v1/messages/:partitionId/:transactionId", get_message, access=READ)
    router.add("DELETE", "/api/v1/messages/:partitionId/:transactionId", delete_message,
               access=WRITE)
    router.add("POST", "/api/v1/messages/:partitionId/:transactionId/retry", retry_message,
               access=WRITE)
    router.add("GET", "/api/v1/status/queues/:queue/messages", queue_messages, access=READ)

    # -- status and analytics ----------------------------------------------------------------

    async def status_summary(request: Request) -> Response:
        return json_response(200, await status.status(
            db, request.query, identity=broker.identity, stats_age=broker.stats_age()))

    async def status_queues(request: Request) -> Response:
        queues, page = await resources.list_queues(db, request.query, default_limit=100)
        return json_response(200, {"queues": queues, "pagination": page.to_wire()})

    async def status_queue(request: Request) -> Response:
        return json_response(200, await status.queue_status(db, request.params["queue"]))

    async def status_analytics(request: Request) -> Response:
        return json_response(200, await status.analytics(db, request.query))

    async def refresh(request: Request) -> Response:
        return json_response(200, await broker.refresh_stats())

    router.add("GET", "/api/v1/status", status_summary, access=READ)
    router.add("GET", "/api/v1/status/queues", status_queues, access=READ)
    router.add("GET", "/api/v1/status/queues/:queue", status_queue, access=READ)
    router.add("GET", "/api/v1/status/analytics", status_analytics, access=READ)
    router.add("POST", "/api/v1/stats/refresh", refresh, access=ADMIN)

    def series(build: Callable[[Database, Mapping[str, str]], Awaitable[Any]]) -> Handler:
        async def handler(request: Request) -> Response:
            return json_response(200, await build(db, request.query))

        return handler

    async def parked(request: Request) -> Response:
        return json_response(200, await analytics.parked_replicas(
            db, request.query, local=broker.figures(),
            fresh_seconds=broker.sampler.fresh_seconds))

    async def postgres(request: Request) -> Response:
        return json_response(200, await analytics.postgres_stats(db))

    for name, handler in (("system-metrics", series(analytics.system_metrics)),
                          ("worker-metrics", series(analytics.worker_metrics)),
                          ("queue-lag", series(analytics.queue_lag)),
                          ("queue-ops", series(analytics.queue_ops)),
                          ("queue-parked-replicas", parked),
                          ("retention", series(analytics.retention)),
                          ("postgres-stats", postgres)):
        router.add("GET", f"/api/v1/analytics/{name}", handler, access=READ)

    # -- metrics and identity ----------------------------------------------------------------

    async def metrics_json(request: Request) -> Response:
        figures = broker.figures()
        requests_rate, messages_rate = broker.sampler.rates(figures)
        return json_response(200, metrics.metrics_json(
            figures, requests_rate=requests_rate, messages_rate=messages_rate,
            stats_age=broker.stats_age()))

    async def prometheus(request: Request) -> Response:
        families = metrics.worker_families(broker.figures())
        try:
            cluster, workers = await metrics.cluster_families(
                db, fresh_seconds=broker.sampler.fresh_seconds)
        except Exception as exc:  # the live families are always served (contract §10)
            log.warning("metrics: the database did not answer", extra={"error": str(exc)})
        else:
            families += cluster
            for row in workers:
                if row["worker_id"] != broker.identity.worker_id:
                    families += [metrics.Family.from_json(f)
                                 for f in msgspec.json.decode(row["families"])]
        return Response(200, metrics.render_prometheus(families), [
            (b"content-type", metrics.PROMETHEUS_CONTENT_TYPE),
            (b"cache-control", b"no-cache"), *CORS_HEADERS])

    async def whoami(request: Request) -> Response:
        who = await auth.identify(request.headers)
        return json_response(200, {"sub": who.sub, "role": who.role, "level": who.level})

    router.add("GET", "/metrics", metrics_json, access=PUBLIC)
    router.add("GET", "/metrics/prometheus", prometheus, access=PUBLIC)
    # Any valid token may ask who it is: the handler checks the token itself.
    router.add("GET", "/api/v1/auth/whoami", whoami, access=PUBLIC)
