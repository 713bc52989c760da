"""The real `queen-trio` executable against a real broker: every resource command, the
output formats, exit statuses, contexts and their precedence, the throwaway group of `tail`
(docs/cli.md). These stand on the operations routes (resources, consumer groups, status).

Independent invocations run side by side in a nursery: each start costs a few tenths of a
second, and the checks do not depend on one another.
"""

from __future__ import annotations

import json
import signal
import stat
import subprocess

import trio
import yaml

from tests.support.cli import EXECUTABLE, cli_env, gather, interruptible, run_cli, until
from tests.support.consuming import ack_batch, configure, pop, push
from tests.support.processes import free_port


async def test_probes_resources_and_groups_in_every_format(http_url, client):
    await configure(client, "shop.orders", leaseTime=120)
    await push(client, "shop.orders", {"n": 1}, {"n": 2}, partition="p1", txids=["t1", "t2"])
    await push(client, "shop.orders", {"n": 3}, partition="p2", txids=["t3"])
    delivered = await pop(client, "shop.orders", consumerGroup="billing", partitions=2, batch=10)
    await ack_batch(client, delivered["messages"][:1], group="billing")
    s = ("--server", http_url)
    (ping, version, queues_json, queues_nd, queues_yaml, names, table, wide, headless,
     describe, status, status_queue, partitions, groups, group, lag, metrics, prometheus,
     messages, dlq) = await gather(
         run_cli("ping", *s, "-o", "json"),
         run_cli("version", *s, "-o", "json"),
         run_cli("queue", "list", *s, "-o", "json"),
         run_cli("queue", "list", *s, "-o", "ndjson"),
         run_cli("queue", "list", *s, "-o", "yaml"),
         run_cli("queue", "list", *s, "-o", "name"),
         run_cli("queue", "list", *s, "-o", "table"),
         run_cli("queue", "list", *s, "-o", "wide"),
         run_cli("queue", "list", *s, "-o", "table", "--no-headers"),
         run_cli("queue", "describe", "shop.orders", *s, "-o", "json"),
         run_cli("status", *s, "-o", "json"),
         run_cli("status", "shop.orders", "--partitions", *s, "-o", "table"),
         run_cli("partition", "list", "--queue", "shop.orders", *s, "-o", "name"),
         run_cli("group", "list", *s, "-o", "json"),
         run_cli("group", "describe", "billing", *s, "-o", "table"),
         run_cli("lag", *s, "-o", "json"),
         run_cli("metrics", *s, "-o", "json"),
         run_cli("metrics", "--prometheus", *s),
         run_cli("messages", "list", "--queue", "shop.orders", *s, "-o", "json"),
         run_cli("dlq", "list", "shop.orders", *s))
    assert ping.status == 0 and ping.json()["status"] == "healthy"
    assert version.json() == {"client": "0.1.0", "server": "0.1.0", "serverName": "queen-trio"}
    (queue,) = queues_json.json()
    assert queue["name"] == "shop.orders" and queue["namespace"] == "shop"
    assert queue["messages"]["pending"] + queue["messages"]["processing"] == 2
    assert queues_nd.lines() == [queue] and yaml.safe_load(queues_yaml.out) == [queue]
    assert names.out == "shop.orders\n"
    header, row = table.out.splitlines()
    assert header.split() == ["NAME", "PARTITIONS", "TOTAL", "PENDING", "PROCESSING", "CONSUMED",
                              "DLQ"]
    assert row.split()[:2] == ["shop.orders", "3"]  # configure made the Default partition
    assert "NAMESPACE" in wide.out and "LAST ACTIVITY" in wide.out
    assert [line.split() for line in headless.out.splitlines()] == [row.split()]
    detail = describe.json()
    assert sorted(p["name"] for p in detail["partitions"]) == ["Default", "p1", "p2"]
    assert detail["options"]["leaseTime"] == 120
    assert status.json()["messages"]["total"] == 3
    assert "Partitions:" in status_queue.out and "p1" in status_queue.out
    assert partitions.out.split() == ["shop.orders/Default", "shop.orders/p1", "shop.orders/p2"]
    (billing,) = [g for g in groups.json() if g["name"] == "billing"]
    assert billing["throwaway"] is False and billing["queueName"] == "shop.orders"
    assert "shop.orders" in group.out and "LEASED" in group.out
    assert lag.status == 0 and {r["consumer_group"] for r in lag.json()} == {"billing"}
    assert "requests" in metrics.json()
    assert "# TYPE" in prometheus.out
    assert {m["transactionId"] for m in messages.json()} == {"t1", "t2", "t3"}
    assert dlq.status == 4 and dlq.out.strip() == "[]"
    first = delivered["messages"][0]
    ids = (first["partitionId"], first["transactionId"])
    got, not_dead = await gather(run_cli("messages", "get", *ids, *s, "-o", "json"),
                                 run_cli("messages", "retry", *ids, *s))
    assert got.json()["payload"] == {"n": 1} and got.json()["transactionId"] == "t1"
    assert not_dead.status == 5 and "Dead letter not found" in not_dead.err
    deleted = await run_cli("messages", "delete", *ids, "--yes", *s, "-o", "table")
    assert (deleted.status, deleted.out) == (0, "message t1 deleted\n")
    gone = await run_cli("messages", "get", *ids, *s)
    assert gone.status == 5 and "Message not found" in gone.err


async def test_queue_configure_seek_replay_and_deletes(http_url, client):
    await push(client, "replayed", 1, 2, 3, txids=["a", "b", "c"])
    for _ in range(2):  # the group reads everything, acks it
        reply = await pop(client, "replayed", consumerGroup="g", batch=10)
        if reply:
            await ack_batch(client, reply["messages"], group="g")
    s = ("--server", http_url)
    configured = await run_cli("queue", "configure", "replayed", "--set", "retryLimit=7",
                               "--set", "deadLetterQueue=false", *s, "-o", "json")
    assert configured.json()["options"]["retryLimit"] == 7
    assert configured.json()["options"]["deadLetterQueue"] is False
    unknown_option = await run_cli("queue", "configure", "replayed", "--set", "bogus=1", *s)
    assert unknown_option.status == 1 and "bogus" in unknown_option.out
    replay = await run_cli("replay", "replayed", "--group", "g", "--to",
                           "2000-01-01T00:00:00+02:00", *s, "-o", "table")
    # The absolute UTC time that was sent, whatever offset was typed.
    assert replay.out == "replaying replayed for g from 1999-12-31T22:00:00.000Z (1 partitions " \
                         "moved)\n"
    again = await pop(client, "replayed", consumerGroup="g", batch=10)
    assert [m["data"] for m in again["messages"]] == [1, 2, 3]
    to_end = await run_cli("group", "seek", "g", "replayed", "--to", "end", *s, "-o", "json")
    assert to_end.json()["seekToEnd"] is True
    assert await pop(client, "replayed", consumerGroup="g") is None
    ago = await run_cli("replay", "replayed", "--group", "g", "--to", "15m ago", *s)
    assert ago.status == 0 and ago.json()["targetTimestamp"].endswith("Z")
    deleted_group = await run_cli("group", "delete", "g", "--queue", "replayed", *s, "-o", "json")
    missing_group, deleted_queue, missing_queue = await gather(
        run_cli("group", "delete", "never-was", *s),
        run_cli("queue", "delete", "replayed", *s),
        run_cli("queue", "delete", "never-was", *s))
    assert deleted_group.status == 0 and deleted_group.json()["deletedPartitions"] == 1
    assert missing_group.status == 5 and "not found" in missing_group.err
    assert deleted_queue.status == 0 and (await client.get(
        "/api/v1/resources/queues/replayed")).status_code == 404
    assert missing_queue.status == 5


async def test_exit_statuses_and_one_line_errors(http_url):
    down = f"http://127.0.0.1:{free_port()}"
    unknown_queue, unknown_status, server_down, usage, bad_url, empty_pop, bad_time = \
        await gather(
            run_cli("queue", "describe", "nosuch", "--server", http_url),
            run_cli("status", "nosuch", "--server", http_url),
            run_cli("queue", "list", "--server", down),
            run_cli("pop", "--server", http_url),
            run_cli("ping", "--server", "ftp://x"),
            run_cli("pop", "nosuch", "--server", http_url),
            run_cli("replay", "q", "--group", "g", "--to", "yesterday-ish", "--server", http_url))
    assert unknown_queue.status == 5 and "Queue not found" in unknown_queue.err
    assert unknown_status.status == 5
    assert server_down.status == 6 and f"cannot reach {down}" in server_down.err
    assert usage.status == 2 and "give a QUEUE" in usage.err
    assert bad_url.status == 2 and "http:// or https://" in bad_url.err
    assert empty_pop.status == 5  # an empty pop of a queue that does not exist
    assert bad_time.status == 2 and "is not a time" in bad_time.err
    for done in (unknown_queue, unknown_status, server_down, usage, bad_url, empty_pop,
                 bad_time):
        assert len(done.err.splitlines()) == 1 and "Traceback" not in done.err


async def test_contexts_and_the_precedence_of_flags_environment_and_context(http_url, tmp_path):
    down = f"http://127.0.0.1:{free_port()}"
    env = cli_env(XDG_CONFIG_HOME=str(tmp_path))
    del env["QUEEN_CONFIG"]  # the XDG location
    created = await run_cli("context", "set", "live", "--server", http_url, env=env)
    assert created.status == 0 and "(current)" in created.out
    await run_cli("context", "set", "dead", "--server", down, "--token", "t-dead", env=env)
    config = tmp_path / "queen-trio" / "config.yaml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert yaml.safe_load(config.read_text())["contexts"]["dead"] == {"server": down,
                                                                       "token": "t-dead"}
    current, listed = await gather(
        run_cli("context", "current", env=env),
        run_cli("context", "list", "-o", "json", env=env))
    assert current.out == "live\n"
    assert [(c["name"], c["current"], c["token"]) for c in listed.json()] == [
        ("live", True, "no"), ("dead", False, "yes")]
    # The current context, then QUEEN_CONTEXT over it, QUEEN_SERVER over that, a flag over all.
    by_context, by_env_context, by_env_server, by_flag, flag_context = await gather(
        run_cli("ping", env=env),
        run_cli("ping", env={**env, "QUEEN_CONTEXT": "dead"}),
        run_cli("ping", env={**env, "QUEEN_CONTEXT": "dead", "QUEEN_SERVER": http_url}),
        run_cli("ping", "--server", down, env={**env, "QUEEN_SERVER": http_url}),
        run_cli("ping", "--context", "dead", env=env))
    assert by_context.status == 0
    assert by_env_context.status == 6 and down in by_env_context.err
    assert by_env_server.status == 0
    assert by_flag.status == 6
    assert flag_context.status == 6
    used = await run_cli("context", "use", "dead", env=env)
    assert used.status == 0 and (await run_cli("ping", env=env)).status == 6
    assert (await run_cli("context", "use", "nosuch", env=env)).status == 2
    deleted = await run_cli("context", "delete", "dead", env=env)  # not a terminal: no question
    assert deleted.status == 0
    assert (await run_cli("context", "current", env=env)).status == 4
    broken = tmp_path / "broken.yaml"
    broken.write_text("contexts: [1, 2]\n")
    refused = await run_cli("ping", env={**env, "QUEEN_CONFIG": str(broken)})
    assert refused.status == 2 and "contexts must be a mapping" in refused.err


async def groups_named(client, prefix: str) -> list[str]:
    r = await client.get("/api/v1/consumer-groups")
    return [g["name"] for g in r.json() if g["name"].startswith(prefix)]


async def test_ctrl_c_gives_back_and_deletes_the_throwaway_group(http_url, client):
    await push(client, "watched", "old")
    tail = await trio.lowlevel.open_process(
        [EXECUTABLE, "tail", "watched", "-f", "--server", http_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
        preexec_fn=interruptible)
    await until(lambda: _has_group(client, "queen-trio-tail-"))
    (name,) = await groups_named(client, "queen-trio-tail-")
    host, pid = name.removeprefix("queen-trio-tail-").rsplit("-", 2)[:2]
    assert pid == str(tail.pid) and host
    listed = await run_cli("group", "list", "--server", http_url, "-o", "json")
    assert [g["throwaway"] for g in listed.json() if g["name"] == name] == [True]
    await push(client, "watched", "new-1", "new-2")
    lines = b""
    with trio.fail_after(60):
        while lines.count(b"\n") < 2:
            lines += await tail.stdout.receive_some(65536)
    # Subscribed to new messages only: "old" was pushed before it joined.
    assert [json.loads(line)["data"] for line in lines.splitlines()] == ["new-1", "new-2"]
    tail.send_signal(signal.SIGINT)
    with trio.fail_after(60):
        status = await tail.wait()
    # Both at once: a wrong status names its cause on stderr.
    assert (status, await tail.stderr.receive_some(65536)) == (130, b"")
    assert await groups_named(client, "queen-trio-tail-") == []


async def _has_group(client, prefix: str) -> bool:
    return bool(await groups_named(client, prefix))
