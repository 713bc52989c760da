"""`queen-trio apply -f`: manifests made so, idempotently, with --dry-run, never seeking."""

from __future__ import annotations

from tests.support.cli import run_cli
from tests.support.consuming import ack_batch, pop, push

MANIFESTS = """\
kind: Queue
name: applied
namespace: shop
config: {leaseTime: 90, retryLimit: 2}
---
kind: ConsumerGroup
name: readers
queue: applied
subscription: {mode: all}
---
kind: ConsumerGroup
name: late
queue: applied
subscription: {from: "2026-01-01T00:00:00Z"}
"""


async def test_apply_is_idempotent_dry_runs_and_never_seeks(http_url, client, tmp_path):
    manifest = tmp_path / "queues.yaml"
    manifest.write_text(MANIFESTS)
    s = ("--server", http_url, "-o", "table")
    dry = await run_cli("apply", "-f", str(manifest), "--dry-run", *s)
    assert dry.status == 0, dry.err
    assert "queue/applied would be created: namespace=shop; leaseTime=90; retryLimit=2" in dry.out
    assert (await client.get("/api/v1/status/queues/applied")).status_code == 404
    first = await run_cli("apply", "-f", str(manifest), *s)
    assert first.out.splitlines() == [
        "queue/applied created: namespace=shop; leaseTime=90; retryLimit=2",
        "consumergroup/readers (queue applied) created by its first pop: pop with "
        "consumerGroup=readers&subscriptionMode=all, e.g. queen-trio pop applied --group "
        "readers --subscription-mode all",
        "consumergroup/late (queue applied) created by its first pop: pop with "
        "consumerGroup=late&subscriptionFrom=2026-01-01T00:00:00.000Z, e.g. queen-trio pop "
        "applied --group late --subscription-from 2026-01-01T00:00:00.000Z"]
    config = (await client.get("/api/v1/status/queues/applied")).json()["queue"]
    assert (config["namespace"], config["config"]["leaseTime"]) == ("shop", 90)
    # The groups join by their first pops: readers as declared and reading one message,
    # late from the beginning (not as declared).
    await push(client, "applied", 1, 2, 3)
    first_pop = await pop(client, "applied", consumerGroup="readers", subscriptionMode="all")
    await ack_batch(client, first_pop["messages"], group="readers")
    await pop(client, "applied", consumerGroup="late", subscriptionMode="all")
    second = await run_cli("apply", "-f", str(manifest), *s)
    assert second.out.splitlines()[:2] == ["queue/applied unchanged",
                                           "consumergroup/readers (queue applied) unchanged"]
    assert second.out.splitlines()[2].startswith(
        "consumergroup/late (queue applied) updated: subscription: all -> from "
        "2026-01-01T00:00:00.000Z")
    third = await run_cli("apply", "-f", str(manifest), *s, "--dry-run")
    assert third.out.splitlines() == ["queue/applied unchanged",
                                      "consumergroup/readers (queue applied) unchanged",
                                      "consumergroup/late (queue applied) unchanged"]
    # No seek: readers goes on after what it consumed.
    assert [m["data"] for m in (await pop(client, "applied", consumerGroup="readers",
                                          batch=10))["messages"]] == [2, 3]
    manifest.write_text(MANIFESTS.replace("leaseTime: 90", "leaseTime: 120"))
    changed = await run_cli("apply", "-f", str(manifest), *s)
    assert changed.out.splitlines()[0] == "queue/applied configured: leaseTime: 90 -> 120"
    for bad, why in (("kind: Topic\nname: x\n", "kind must be Queue or ConsumerGroup"),
                     ("kind: Queue\nname: applied\nconfig: {leaseTme: 3}\n",
                      "unknown option 'leaseTme'"),
                     ("kind: Queue\nnme: x\n", "Queue has no field 'nme'"),
                     ("kind: [\n", "is not YAML")):
        manifest.write_text(bad)
        refused = await run_cli("apply", "-f", str(manifest), *s)
        assert (refused.status, why in refused.err) == (2, True), refused
