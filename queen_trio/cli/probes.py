"""Probes and figures: `ping`, `version`, `status`, `lag`, `metrics`."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..exits import Exit
from .api import Api, check, segment
from .connection import Connection, request_options
from .failures import CliError
from .help import examples
from .output import Output, Row, col, figure_columns, group_label, when


def say_left_behind() -> None:
    """With no broker answering: an embedded PostgreSQL still running on this machine's data
    directory without its broker (one that was killed) is said on stderr, with what to do."""
    import os

    from ..settings import default_data_dir
    from ..storage.datadir import held  # doors: they read two files and start nothing
    from ..storage.embedded import running_postmaster

    data_dir = Path(os.environ.get("QUEEN_DATA_DIR") or default_data_dir())
    running = running_postmaster(data_dir)
    if running is None or held(data_dir):
        return
    print(f"queen-trio status: the embedded PostgreSQL of {data_dir} (pid {running.pid}, port "
          f"{running.port}) is running without its broker, which did not stop cleanly: "
          f"`queen-trio serve` adopts it, or stop it with `pg_ctl -D {data_dir / 'pgdata'} stop`",
          file=sys.stderr)


def health(api: Api) -> tuple[dict[str, Any], float]:
    """GET /health, and how long it took (ms). An unhealthy broker answers 503 with a body."""
    started = time.perf_counter()
    response = api.send("GET", "/health")
    elapsed = (time.perf_counter() - started) * 1000
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or "status" not in body:
        check(response)
        raise CliError(f"{api.server} answered /health with something else than a broker's "
                       f"health ({response.status_code})", Exit.UNREACHABLE)
    return body, elapsed


@click.command(epilog=examples("queen-trio ping", "queen-trio ping --server http://b:6632"))
@request_options()
def ping(connection: Connection, out: Output) -> int:
    """Ask the broker whether it and its database answer. Exits 6 when it is unhealthy or
    cannot be reached."""
    body, elapsed = health(Api(connection))
    healthy = body.get("status") == "healthy"
    out.say(f"{connection.server}: {body.get('status')} ({body.get('server')} "
            f"{body.get('version')}, database {body.get('database')}) in {elapsed:.0f} ms",
            {**body, "url": connection.server, "latencyMs": round(elapsed, 3)})
    if not healthy:
        raise CliError(f"{connection.server} is unhealthy: database {body.get('database')}",
                       Exit.UNREACHABLE)
    return Exit.OK


@click.command(epilog=examples("queen-trio version", "queen-trio version --client"))
@click.option("--client", "client_only", is_flag=True, help="this CLI's version only")
@request_options()
def version(connection: Connection, out: Output, client_only: bool) -> int:
    """Print the CLI's version and the server's. Exits 6 when the server cannot be asked."""
    document: dict[str, Any] = {"client": __version__}
    failure = None
    if not client_only:
        try:
            body, _ = health(Api(connection))
            document["server"] = body.get("version")
            document["serverName"] = body.get("server")
        except CliError as exc:
            failure = exc
            document["server"] = None
    if out.human:
        click.echo(f"client: queen-trio {__version__}")
        if not client_only:
            click.echo(f"server: {document.get('serverName', '?')} {document['server']} "
                       f"({connection.server})" if failure is None else
                       f"server: unknown ({connection.server})")
    else:
        out.document(document)
    if failure is not None:
        raise failure
    return Exit.OK


@click.command(epilog=examples("queen-trio status", "queen-trio status orders --partitions",
                               "queen-trio status -o json | jq .messages"))
@click.argument("queue", required=False)
@click.option("--partitions", is_flag=True, help="with QUEUE: one row per partition")
@request_options()
def status(connection: Connection, out: Output, queue: str | None, partitions: bool) -> None:
    """The broker's figures (messages, leases, dead letters, workers), or one queue's
    counters and options. An unknown queue exits 5."""
    api = Api(connection)
    if queue is None:
        if partitions:
            raise click.UsageError("--partitions needs a QUEUE")
        try:
            body = api.get("/api/v1/status")
        except CliError as exc:
            if exc.status == Exit.UNREACHABLE:
                say_left_behind()
            raise
        fields = [
            *figure_columns("messages", upper=False),
            col("retrying", ("messages", "failed")),
            col("leases", ("leases", "active")),
            # Every group's leased messages; `processing` counts the slowest group's only.
            col("in flight (every group)", ("leases", "totalBatchSize")),
            col("workers", lambda b: len(b["workers"])),
            col("queues", lambda b: len(b["queues"])),
            col("answered by", "answeredBy", wide=True),
            col("stats age (s)", "statsAge", wide=True),
        ]
        out.record(body, fields, name="status", sections=[
            ("Queues", body["queues"], [col("NAME", "name"), col("NAMESPACE", "namespace"),
                                        col("TASK", "task"), col("PARTITIONS", "partitions"),
                                        col("CONSUMED", "totalConsumed")])])
        return
    body = api.get(f"/api/v1/status/queues/{segment(queue)}")
    info = body["queue"]
    fields = [col("name", ("queue", "name")), col("namespace", ("queue", "namespace")),
              col("task", ("queue", "task")), col("priority", ("queue", "priority")),
              col("created", lambda b: when(info["createdAt"])),
              col("partitions", lambda b: len(b["partitions"])),
              *figure_columns("totals", upper=False),
              *(col(key, ("queue", "config", key), wide=True) for key in info["config"])]
    sections = []
    if partitions:
        sections.append(("Partitions", body["partitions"], PARTITION_STATS))
    out.record(body, fields, name=info["name"], sections=sections)


PARTITION_STATS = [
    col("PARTITION", "name"), *figure_columns("messages"),
    col("LAST ACTIVITY", lambda p: when(p.get("lastActivity"))),
    col("FAILED", ("messages", "failed"), wide=True),
    col("OLDEST", lambda p: when(p.get("oldestMessage")), wide=True),
    col("ID", "id", wide=True),
]


LAG_COLUMNS = [
    col("GROUP", lambda r: group_label(r["consumer_group"])), col("QUEUE", "queue_name"),
    col("PARTITION", "partition_name"), col("MESSAGES", "offset_lag"),
    col("SECONDS", "time_lag_seconds"),
    col("OLDEST", lambda r: when(r["oldest_unconsumed_at"])),
    col("LAST CONSUMED", lambda r: when(r["last_consumed_at"]), wide=True),
    col("LEASE", "worker_id", wide=True),
]


@click.command(epilog=examples("queen-trio lag", "queen-trio lag --min-seconds 600 -o json"))
@click.option("--min-seconds", type=click.IntRange(0), default=0, show_default=True,
              help="only partitions whose oldest unconsumed message is at least this old")
@click.option("--limit", type=click.IntRange(1, 1000), default=1000, show_default=True)
@request_options()
def lag(connection: Connection, out: Output, min_seconds: int, limit: int) -> None:
    """Consumer groups behind their queues, per partition, most lagging first."""
    rows: list[Row] = Api(connection).get("/api/v1/consumer-groups/lagging",
                                          minLagSeconds=min_seconds, limit=limit)
    out.rows(rows, LAG_COLUMNS, name=lambda r: f"{r['consumer_group']}/{r['queue_name']}/"
                                                f"{r['partition_name']}")


@click.command(epilog=examples("queen-trio metrics", "queen-trio metrics --prometheus"))
@click.option("--prometheus", is_flag=True, help="the Prometheus text exposition instead")
@request_options()
def metrics(connection: Connection, out: Output, prometheus: bool) -> None:
    """The answering broker process's figures (GET /metrics), or every worker's families in
    the Prometheus text format (GET /metrics/prometheus)."""
    api = Api(connection)
    if prometheus:
        click.echo(api.get("/metrics/prometheus"), nl=False)
        return
    body = api.get("/metrics")
    flat = dict(flatten(body))
    if out.human:
        out.record(flat, [col(key, key) for key in flat])
    else:
        out.record(body, [], name=str(body.get("workerId", "")))


def flatten(value: Any, prefix: str = "") -> Any:
    """(dotted key, scalar) for every leaf of a JSON object."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from flatten(inner, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), value
