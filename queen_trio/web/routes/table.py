"""The route table: every route of the broker, one row each, in the order the router tries
them, and `create_app`, which serves it.

A row is `Route(method, path, access, handler)`, plus `waits=` for a route whose requests can
wait (web/router.py). `:name` is one path segment, `*name` the rest of the path. Where two
paths of one method can match the same request, the one with a literal segment where the
other has a parameter comes first ("lagging" is not a group name).
`tests/unit/test_route_table.py` checks the table's rules, and that docs/api.md lists exactly
these routes.
"""

from __future__ import annotations

from ...broker import Broker
from ..app import App
from ..auth import ADMIN, PUBLIC, PUSH, READ, WRITE, Authenticator
from ..dashboard import assets
from ..router import Route, Router, Waits
from . import (
    analytics,
    consume,
    dashboard,
    ephemeral,
    groups,
    health,
    kv,
    messages,
    metrics,
    push,
    queues,
    reads,
    resources,
    spool,
    status,
    streams,
    timers,
    traces,
    whoami,
)
from .not_implemented import not_implemented

LONG_POLL = Waits.WHEN_ASKED

ROUTES: tuple[Route, ...] = (
    # -- pushes and transactions -----------------------------------------------------------
    Route("POST", "/api/v1/push", PUSH, push.push),
    Route("POST", "/api/v1/transaction", WRITE, push.transaction),
    # -- consuming -----------------------------------------------------------------------------
    Route("GET", "/api/v1/pop/queue/:queue", WRITE, consume.pop, LONG_POLL),
    Route("GET", "/api/v1/pop/queue/:queue/partition/:partition", WRITE, consume.pop,
          LONG_POLL),
    Route("GET", "/api/v1/pop", WRITE, consume.pop, LONG_POLL),
    Route("POST", "/api/v1/ack", WRITE, consume.ack_one),
    Route("POST", "/api/v1/ack/batch", WRITE, consume.ack_batch),
    Route("POST", "/api/v1/lease/:leaseId/extend", WRITE, consume.extend_lease),
    Route("GET", "/api/v1/dlq", READ, consume.dead_letters),
    # -- queues --------------------------------------------------------------------------------
    Route("POST", "/api/v1/configure", WRITE, queues.configure),
    Route("DELETE", "/api/v1/resources/queues/:queue", ADMIN, queues.delete),
    # -- KV and locks (docs/kv-and-locks.md) ----------------------------------------------------
    Route("POST", "/api/v1/kv", WRITE, kv.kv_batch),
    Route("POST", "/api/v1/locks", WRITE, kv.locks),
    # -- ephemeral queues (docs/ephemeral.md) ----------------------------------------------
    Route("POST", "/api/v1/ephemeral/configure", WRITE, ephemeral.configure),
    Route("POST", "/api/v1/ephemeral/reset", WRITE, ephemeral.reset),
    Route("POST", "/api/v1/ephemeral/push", PUSH, ephemeral.push),
    Route("POST", "/api/v1/ephemeral/ack", WRITE, ephemeral.ack),
    Route("GET", "/api/v1/ephemeral/pop", WRITE, ephemeral.pop, LONG_POLL),
    Route("GET", "/api/v1/ephemeral/queues", READ, ephemeral.queues),
    Route("GET", "/api/v1/ephemeral/queues/:queue/depth", READ, ephemeral.depth),
    Route("DELETE", "/api/v1/ephemeral/queue/:queue", WRITE, ephemeral.delete),
    # -- traces --------------------------------------------------------------------------------
    Route("POST", "/api/v1/traces", WRITE, traces.record),
    Route("GET", "/api/v1/traces/names", READ, traces.names),
    Route("GET", "/api/v1/traces/by-name/:traceName", READ, traces.by_name),
    Route("GET", "/api/v1/traces/:partitionId/:transactionId", READ, traces.of_message),
    # -- resources -----------------------------------------------------------------------------
    Route("GET", "/api/v1/resources/overview", READ, resources.overview),
    Route("GET", "/api/v1/resources/queues", READ, resources.queues),
    Route("GET", "/api/v1/resources/queues/:queue/depth", READ, resources.depth),
    Route("GET", "/api/v1/resources/queues/:queue", READ, resources.queue),
    Route("GET", "/api/v1/resources/partitions", READ, resources.partitions),
    Route("GET", "/api/v1/resources/namespaces", READ, resources.namespaces),
    Route("GET", "/api/v1/resources/tasks", READ, resources.tasks),
    Route("GET", "/api/v1/resources/kv", READ, kv.namespaces),
    Route("GET", "/api/v1/resources/kv/:ns", READ, kv.browse),
    Route("GET", "/api/v1/resources/locks", READ, kv.lock_list),
    Route("GET", "/api/v1/resources/consumers", READ, kv.consumers),
    # -- messages ------------------------------------------------------------------------------
    Route("GET", "/api/v1/messages", READ, messages.list_messages),
    Route("GET", "/api/v1/messages/:partitionId/:transactionId", READ, messages.get),
    Route("DELETE", "/api/v1/messages/:partitionId/:transactionId", WRITE, messages.delete),
    Route("POST", "/api/v1/messages/:partitionId/:transactionId/retry", WRITE,
          messages.retry),
    Route("GET", "/api/v1/status/queues/:queue/messages", READ, messages.of_queue),
    # -- consumer groups -----------------------------------------------------------------------
    Route("GET", "/api/v1/consumer-groups", READ, groups.list_groups),
    Route("GET", "/api/v1/consumer-groups/lagging", READ, groups.lagging),
    Route("GET", "/api/v1/consumer-groups/:group", READ, groups.detail),
    Route("DELETE", "/api/v1/consumer-groups/:group", ADMIN, groups.delete),
    Route("DELETE", "/api/v1/consumer-groups/:group/queues/:queue", ADMIN, groups.delete),
    Route("POST", "/api/v1/consumer-groups/:group/subscription", WRITE, groups.subscription),
    Route("POST", "/api/v1/consumer-groups/:group/queues/:queue/seek", WRITE, groups.seek),
    Route("POST", "/api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek",
          WRITE, groups.seek),
    # -- timers (docs/timers.md) ---------------------------------------------------------------
    Route("POST", "/api/v1/timers", WRITE, timers.apply),
    Route("GET", "/api/v1/timers/:queue", READ, timers.list_timers),
    Route("GET", "/api/v1/timers/:queue/*timerKey", READ, timers.peek),
    # Never gated: a cancel must always get through.
    Route("DELETE", "/api/v1/timers/:queue/*timerKey", WRITE, timers.cancel),
    # -- offset reads (docs/offset-reads.md): read-only POSTs ----------------------------------
    Route("POST", "/api/v1/fetch", READ, reads.fetch),
    Route("POST", "/api/v1/partitions/changed", READ, reads.changed),
    # -- status --------------------------------------------------------------------------------
    Route("GET", "/api/v1/status", READ, status.summary),
    Route("GET", "/api/v1/status/queues", READ, status.queues),
    Route("GET", "/api/v1/status/queues/:queue", READ, status.queue),
    Route("GET", "/api/v1/status/analytics", READ, status.analytics),
    Route("POST", "/api/v1/stats/refresh", ADMIN, status.refresh),
    Route("GET", "/api/v1/status/buffers", READ, spool.buffers),
    Route("GET", "/api/v1/status/timers", READ, timers.summary),
    Route("POST", "/api/v1/status/buffers/retry", ADMIN, spool.retry_failed),
    # -- analytics -----------------------------------------------------------------------------
    Route("GET", "/api/v1/analytics/system-metrics", READ, analytics.system_metrics),
    Route("GET", "/api/v1/analytics/worker-metrics", READ, analytics.worker_metrics),
    Route("GET", "/api/v1/analytics/queue-lag", READ, analytics.queue_lag),
    Route("GET", "/api/v1/analytics/queue-ops", READ, analytics.queue_ops),
    Route("GET", "/api/v1/analytics/queue-parked-replicas", READ, analytics.parked_replicas),
    Route("GET", "/api/v1/analytics/retention", READ, analytics.retention),
    Route("GET", "/api/v1/analytics/postgres-stats", READ, analytics.postgres_stats),
    # -- streams (the official SDK's server half; docs/streams.md) ---------------------------
    Route("POST", "/streams/v1/queries", WRITE, streams.register),
    Route("GET", "/streams/v1/queries", READ, streams.list_queries),
    Route("GET", "/streams/v1/queries/:name", READ, streams.query_detail),
    Route("DELETE", "/streams/v1/queries/:name", ADMIN, streams.delete_query),
    Route("POST", "/streams/v1/cycle", WRITE, streams.cycle),
    Route("POST", "/streams/v1/state/get", READ, streams.state_get),
    # -- probes --------------------------------------------------------------------------------
    Route("GET", "/health", PUBLIC, health.health),
    Route("GET", "/metrics", PUBLIC, metrics.as_json),
    Route("GET", "/metrics/prometheus", PUBLIC, metrics.prometheus),
    # Public: any valid token may ask who it is, the handler checks the token itself.
    Route("GET", "/api/v1/auth/whoami", PUBLIC, whoami.whoami),
    # -- the dashboard -------------------------------------------------------------------------
    Route("GET", "/", PUBLIC, dashboard.page),
    Route("GET", "/dashboard", PUBLIC, dashboard.page),
    Route("GET", "/dashboard/", PUBLIC, dashboard.page),
    Route("GET", "/favicon.ico", PUBLIC, dashboard.favicon),
    Route("GET", "/dashboard/*asset", PUBLIC, dashboard.asset),
    # A route of the 2.6 client this broker does not have would go last, as
    # `Route(METHOD, PATH, PUBLIC, not_implemented)` (404 not_implemented); none today.
)

# The (method, path) of every route still answered 404 not_implemented.
NOT_IN_THIS_BROKER: tuple[tuple[str, str], ...] = tuple(
    (route.method, route.path) for route in ROUTES if route.handler is not_implemented)


def create_app(broker: Broker, auth: Authenticator | None = None) -> App:
    """The app serving ROUTES for `broker`; `auth` defaults to one built from the broker's
    settings (the server passes one it has already started, so a bad JWKS refuses to
    boot)."""
    assets()  # the dashboard's files, read now: a broken install fails here, not on a page
    return App(Router(ROUTES), broker, auth or Authenticator(broker.settings.auth),
               max_body_bytes=broker.settings.max_body_bytes,
               cors_origins=broker.settings.cors_origins,
               observe=broker.activity.record_request)
