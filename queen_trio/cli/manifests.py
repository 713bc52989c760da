"""`queen-trio apply -f FILE.yaml`: declared queues and consumer groups, made so.

    kind: Queue
    name: orders
    namespace: shop        # optional
    task: checkout         # optional
    config: {leaseTime: 120, retryLimit: 5}
    ---
    kind: ConsumerGroup
    name: billing
    queue: orders
    subscription: {mode: new}        # or {mode: all}, or {from: 2026-12-01T00:00:00Z}

Applying twice changes nothing the second time. A queue's options are compared with the
broker's first and only the differing ones are sent. A group's subscription is moved through
`POST /consumer-groups/:group/subscription` only when it differs; a group never seeks here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs
import click

from ..exits import Exit
from .api import Api, check, segment
from .connection import Connection, request_options
from .failures import CliError
from .help import examples
from .output import Output
from .times import BEGINNING, iso, parse_time

KINDS = {"Queue": ("name", "namespace", "task", "config"),
         "ConsumerGroup": ("name", "queue", "subscription")}


@attrs.frozen
class Change:
    kind: str
    name: str
    action: str  # created, configured, unchanged, updated, "created by its first pop"
    details: list[str] = attrs.Factory(list)
    dry_run: bool = False

    def sentence(self) -> str:
        would = "would be " if self.dry_run and self.action != "unchanged" else ""
        text = f"{self.kind.lower()}/{self.name} {would}{self.action}"
        return text + (f": {'; '.join(self.details)}" if self.details else "")

    def document(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "action": self.action,
                "details": self.details, "dryRun": self.dry_run}


def load(text: str, source: str) -> list[dict[str, Any]]:
    import yaml

    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise CliError(f"{source} is not YAML: {' '.join(str(exc).split())}", Exit.USAGE) from None
    for number, doc in enumerate(documents, 1):
        where = f"{source}, document {number}"
        if not isinstance(doc, dict):
            raise CliError(f"{where}: a manifest is a mapping", Exit.USAGE)
        kind = doc.get("kind")
        if kind not in KINDS:
            raise CliError(f"{where}: kind must be Queue or ConsumerGroup, not {kind!r}",
                           Exit.USAGE)
        unknown = set(doc) - {"kind", "apiVersion", *KINDS[kind]}
        if unknown:
            raise CliError(f"{where}: {kind} has no field {sorted(unknown)[0]!r}", Exit.USAGE)
        if not isinstance(doc.get("name"), str) or not doc["name"]:
            raise CliError(f"{where}: {kind} needs a name", Exit.USAGE)
        if kind == "Queue" and not isinstance(doc.get("config", {}), dict):
            raise CliError(f"{where}: config is a mapping of queue options", Exit.USAGE)
        if kind == "ConsumerGroup":
            if not isinstance(doc.get("queue"), str):
                raise CliError(f"{where}: ConsumerGroup needs a queue", Exit.USAGE)
            doc["subscription"] = _subscription(doc.get("subscription") or {"mode": "all"},
                                                where)
    return documents


def _subscription(value: Any, where: str) -> tuple[str, dt.datetime | None]:
    """("all" | "new" | "from", start)."""
    if not isinstance(value, dict) or len(value) != 1 or not ({"mode", "from"} & set(value)):
        raise CliError(f"{where}: subscription is {{mode: all|new}} or {{from: TIME}}",
                       Exit.USAGE)
    if "mode" in value:
        if value["mode"] not in ("all", "new"):
            raise CliError(f"{where}: subscription mode is all or new", Exit.USAGE)
        return value["mode"], None
    raw = value["from"]
    start = raw if isinstance(raw, dt.datetime) else parse_time(str(raw))
    if start.tzinfo is None:
        start = start.replace(tzinfo=dt.timezone.utc)
    return "from", start


def _same_time(a: str | None, b: dt.datetime | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs((parse_time(a) - b).total_seconds()) < 0.001


class Applier:
    def __init__(self, api: Api, dry_run: bool) -> None:
        self.api = api
        self.dry_run = dry_run
        self._groups: list[dict[str, Any]] | None = None

    def queue(self, doc: dict[str, Any]) -> Change:
        name, wanted = doc["name"], dict(doc.get("config") or {})
        identity: dict[str, Any] = {k: doc[k] for k in ("namespace", "task") if k in doc}
        current = self._queue_status(name)
        if current is None:
            if not self.dry_run:
                self._configure(name, wanted, identity)
            details = [f"{k}={v}" for k, v in {**identity, **wanted}.items()]
            return Change("Queue", name, "created", details, self.dry_run)
        config = current["config"]
        unknown = sorted(set(wanted) - set(config))
        if unknown:
            raise CliError(f"queue/{name}: unknown option {unknown[0]!r} (known: "
                           f"{', '.join(sorted(config))})", Exit.USAGE)
        changed = {k: v for k, v in wanted.items() if config.get(k) != v}
        moved: dict[str, Any] = {k: v for k, v in identity.items() if current.get(k) != v}
        if not changed and not moved:
            return Change("Queue", name, "unchanged")
        if not self.dry_run:
            self._configure(name, changed, moved)
        details = [f"{k}: {config.get(k)} -> {v}" for k, v in changed.items()]
        details += [f"{k}: {current.get(k)} -> {v}" for k, v in moved.items()]
        return Change("Queue", name, "configured", details, self.dry_run)

    def group(self, doc: dict[str, Any]) -> Change:
        name, queue_name = doc["name"], doc["queue"]
        mode, start = doc["subscription"]
        label = f"{name} (queue {queue_name})"
        existing = [g for g in self._list_groups()
                    if g["name"] == name and g["queueName"] == queue_name]
        if not existing:
            pop = (f"queen-trio pop {queue_name} --group {name} "
                   + ("--subscription-mode " + mode if start is None
                      else f"--subscription-from {iso(start)}"))
            params = (f"subscriptionMode={mode}" if start is None
                      else f"subscriptionFrom={iso(start)}")
            return Change("ConsumerGroup", label, "created by its first pop",
                          [f"pop with consumerGroup={name}&{params}, e.g. {pop}"])
        group_now = existing[0]
        target = self._target(mode, start, group_now)
        if target is None:
            return Change("ConsumerGroup", label, "unchanged")
        if not self.dry_run:
            self.api.post(f"/api/v1/consumer-groups/{segment(name)}/subscription",
                          {"subscriptionTimestamp": iso(target)})
        was = group_now["subscriptionMode"]
        if was == "timestamp":
            was = f"from {group_now['subscriptionTimestamp']}"
        now = mode if start is None else f"from {iso(start)}"
        return Change("ConsumerGroup", label, "updated",
                      [f"subscription: {was} -> {now} (start {iso(target)})"], self.dry_run)

    @staticmethod
    def _target(mode: str, start: dt.datetime | None, group: dict[str, Any]
                ) -> dt.datetime | None:
        """The start to send, or None when the group already starts as declared. `new` is
        the group's own join time; `all` the beginning of time."""
        current = group["subscriptionTimestamp"]
        if mode == "all":
            if group["subscriptionMode"] == "all" or _same_time(current, BEGINNING):
                return None
            return BEGINNING
        if mode == "new":
            if group["subscriptionMode"] == "new":
                return None
            return parse_time(group["subscriptionCreatedAt"])
        assert start is not None
        return None if _same_time(current, start) else start

    def _queue_status(self, name: str) -> dict[str, Any] | None:
        response = self.api.send("GET", f"/api/v1/status/queues/{segment(name)}")
        if response.status_code == 404:
            return None
        check(response)
        queue: dict[str, Any] = response.json()["queue"]  # the broker's reply (docs/api.md)
        return queue

    def _configure(self, name: str, options: dict[str, Any], identity: dict[str, Any]) -> None:
        reply = self.api.post("/api/v1/configure", {"queue": name, "options": options,
                                                    "mode": "merge", **identity})
        if reply.get("ignoredOptions"):
            raise CliError(f"queue/{name}: unknown options {reply['ignoredOptions']}",
                           Exit.USAGE)

    def _list_groups(self) -> list[dict[str, Any]]:
        if self._groups is None:
            self._groups = self.api.get("/api/v1/consumer-groups")
        return self._groups


@click.command(epilog=examples(
    "queen-trio apply -f queues.yaml", "queen-trio apply -f queues.yaml --dry-run",
    "cat queues.yaml | queen-trio apply -f -"))
@click.option("-f", "--filename", "source", type=click.File("r"), required=True,
              help="a YAML file of manifests ('-': stdin)")
@click.option("--dry-run", is_flag=True, help="say what would change; change nothing")
@request_options()
def apply(connection: Connection, out: Output, source: Any, dry_run: bool) -> int:
    """Make the broker match YAML manifests of kind Queue (name, namespace, task, config) and
    ConsumerGroup (name, queue, subscription). Idempotent; prints what changed.

    A group that does not exist yet is created by its first pop: apply prints the pop
    parameters to use. An existing group's subscription is updated, never sought."""
    documents = load(source.read(), getattr(source, "name", "-"))
    applier = Applier(Api(connection), dry_run)
    changes = [applier.queue(d) if d["kind"] == "Queue" else applier.group(d)
               for d in documents]
    if out.human:
        for change in changes:
            click.echo(change.sentence())
    else:
        out.rows([c.document() for c in changes], [], name=lambda c: c["name"])
    return Exit.OK
