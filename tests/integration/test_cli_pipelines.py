"""`queen-trio` in shell pipelines: push, pop, tail and ack as NDJSON, the lossless copy with
either side killed mid-copy, SIGPIPE, Ctrl-C and throwaway groups (docs/cli.md, Pipelines)."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import trio

from tests.support.cli import EXECUTABLE, cli_env, gather, run_cli, until
from tests.support.consuming import ack_batch, configure, pop, push


async def everything(client, queue: str, group: str | None = None) -> list:
    """Every message the group (queue mode by default) can pop right now, acked."""
    got = []
    params = {"consumerGroup": group} if group else {}
    while (reply := await pop(client, queue, batch=1000, partitions=100, **params)) is not None:
        got.extend(reply["messages"])
        await ack_batch(client, reply["messages"], group=group)
    return got


async def held(client, queue: str) -> int:
    """Messages of the queue that are not consumed yet (its depth)."""
    r = await client.get(f"/api/v1/resources/queues/{queue}/depth")
    assert r.status_code == 200, r.text
    return r.json()["pending"]


async def bash(script: str, env: dict) -> subprocess.CompletedProcess:
    with trio.fail_after(120):
        return await trio.run_process(["bash", "-o", "pipefail", "-c", script], env=env,
                                      capture_stdout=True, capture_stderr=True, check=False)


async def test_tail_jq_push_pipeline_copies_and_transforms(http_url, client):
    await push(client, "src", *({"n": i} for i in range(25)))
    q = EXECUTABLE
    s = f"--server {http_url}"
    done = await bash(f"{q} tail src --group copy --auto-ack {s} | jq -c '.data | .seen = true'"
                      f" | {q} push dst {s} --batch 7 > /dev/null", cli_env())
    assert done.returncode == 0, done.stderr
    assert "25 queued, 0 duplicate, 0 buffered, 0 failed" in done.stderr.decode()
    copied = await everything(client, "dst")
    assert sorted(m["data"]["n"] for m in copied) == list(range(25))
    assert all(m["data"]["seen"] is True for m in copied)


async def copy_with_a_kill(http_url, client, killed: str) -> None:
    """40 messages; the copy `tail --no-ack | push --ack-source` runs through a relay that
    hands 10 lines over, then one side is SIGKILLed with 2 lines read but not sent; a second
    pipeline finishes the copy. Nothing is lost or duplicated."""
    await configure(client, "src", leaseTime=120)  # no lease expires here, however slow
    await push(client, "src", *({"p": "p1", "n": i} for i in range(40)), partition="p1")
    env = cli_env()
    s = ["--server", http_url]
    tail = await trio.lowlevel.open_process(
        [EXECUTABLE, "tail", "src", "--group", "copy", "--no-ack", "-f", "-n", "10", *s],
        stdout=subprocess.PIPE, env=env)
    copier = await trio.lowlevel.open_process(
        [EXECUTABLE, "push", "dst", "--ack-source", "--batch", "4", "--linger-ms", "600000",
         *s], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=env)
    buffered = b""
    with trio.fail_after(60):
        while buffered.count(b"\n") < 10:
            buffered += await tail.stdout.receive_some(65536)
    handed = b"".join(line + b"\n" for line in buffered.split(b"\n")[:10])
    await copier.stdin.send_all(handed)
    # Two batches of 4 commit; the last 2 lines wait for more input (a long linger).
    arrivals = Arrivals(client, "dst")
    await until(lambda: arrivals.at_least(8))
    if killed == "push":
        copier.kill()
        await copier.wait()
        await tail.stdout.aclose()  # the reader is gone: tail gives everything back
        assert await tail.wait() == 0
    else:
        tail.kill()
        await tail.wait()
        await copier.stdin.aclose()  # end of input: the last 2 lines are copied
        assert await copier.wait() == 0
    q, flags = EXECUTABLE, f"--server {http_url}"
    # A second copy. Its tail's long polls wait for each batch's transaction to end the lease.
    done = await bash(f"{q} tail src --group copy --no-ack --wait 5 {flags} | "
                      f"{q} push dst --ack-source {flags} > /dev/null", env)
    assert done.returncode == 0, done.stderr
    copied = await everything(client, "dst")
    assert sorted(m["data"]["n"] for m in copied) == list(range(40))
    assert {m["partition"] for m in copied} == {"p1"}
    assert await pop(client, "src", consumerGroup="copy", batch=100, partitions=10) is None


class Arrivals:
    """Counts the messages a queue receives, through a group of its own (autoAck): the
    other groups and queue mode are untouched."""

    def __init__(self, client, queue: str) -> None:  # type: ignore[no-untyped-def]
        self.client, self.queue, self.seen = client, queue, 0

    async def at_least(self, n: int) -> bool:
        reply = await pop(self.client, self.queue, consumerGroup="observer",
                          subscriptionMode="all", autoAck=True, batch=1000, partitions=100)
        self.seen += len(reply["messages"]) if reply else 0
        return self.seen >= n


async def test_the_lossless_copy_survives_the_pusher_killed_mid_copy(http_url, client):
    await copy_with_a_kill(http_url, client, "push")


async def test_the_lossless_copy_survives_the_tail_killed_mid_copy(http_url, client):
    await copy_with_a_kill(http_url, client, "tail")


async def test_tail_follow_into_push_never_stalls_on_a_partial_batch(http_url, client):
    q, s = EXECUTABLE, f"--server {http_url}"
    pipeline = await trio.lowlevel.open_process(
        ["bash", "-c", f"{q} tail live -f --group relay --auto-ack {s} | "
                       f"{q} push relayed --batch 100 --linger-ms 50 {s} > /dev/null"],
        env=cli_env(), start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        await push(client, "live", "warm-up")  # the queue exists before the group joins
        arrivals = Arrivals(client, "relayed")
        await until(lambda: arrivals.at_least(1))
        await push(client, "live", "a", "b", "c")
        # Three messages, far from a batch of 100, and the tail's stdout never closes.
        await until(lambda: arrivals.at_least(4))
    finally:
        os.killpg(pipeline.pid, signal.SIGTERM)
        with trio.fail_after(30):
            await pipeline.wait()
    # Without jq in between, each line (a whole message) is the payload.
    assert [m["data"]["data"] for m in await everything(client, "relayed")] == [
        "warm-up", "a", "b", "c"]


def closed_pipe() -> int:
    """A pipe's write end whose reader is already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return write_end


async def test_a_closed_stdout_ends_tail_and_pop_quietly_holding_nothing(http_url, client):
    await push(client, "piped", *range(12))
    for args in (["tail", "piped", "--group", "g", "-f", "--subscription-mode", "all"],
                 ["pop", "piped", "--group", "g", "-n", "5"],
                 ["tail", "piped", "--group", "g", "--no-ack"]):
        stdout = closed_pipe()
        try:
            with trio.fail_after(60):
                done = await trio.run_process([EXECUTABLE, *args, "--server", http_url],
                                              stdout=stdout, capture_stderr=True, check=False,
                                              env=cli_env())
        finally:
            os.close(stdout)
        assert (done.returncode, done.stderr) == (0, b""), args
    # Nothing was consumed or left leased: the group gets all twelve at once.
    assert sorted(m["data"] for m in await everything(client, "piped", "g")) == list(range(12))


async def test_push_counts_names_bad_lines_and_keys_partitions(http_url, client):
    lines = "\n".join(['{"customer": "c1", "n": 1}', 'not json', '{"customer": "c2", "n": 2}',
                       '{"n": 3}', 'NaN', '', '{"customer": 7, "n": 4}']) + "\n"
    s = ("--server", http_url)
    keyed = await run_cli("push", "keyed", "--partition-key", "$.customer", *s, stdin=lines)
    assert keyed.status == 1
    assert "3 queued, 0 duplicate, 0 buffered, 3 failed" in keyed.err
    assert "line 2: not JSON" in keyed.err and "line 4: no value at $.customer" in keyed.err
    assert "line 5: not JSON" in keyed.err
    results = keyed.lines()
    assert [(r["line"], r["partition"], r["status"]) for r in results] == [
        (1, "c1", "queued"), (3, "c2", "queued"), (7, "7", "queued")]
    assert all(len(r["transactionId"]) == 36 and r["messageId"] for r in results)
    items = ('{"payload": {"x": 1}, "transactionId": "once", "partition": "p"}\n'
             '{"payload": {"x": 1}, "transactionId": "once", "partition": "p"}\n'
             '{"queue": "elsewhere", "payload": 1}\n')
    pushed = await run_cli("push", "items", "--items", *s, stdin=items)
    assert [r["status"] for r in pushed.lines()] == ["queued", "duplicate"]
    assert "line 3: the item names queue 'elsewhere'" in pushed.err and pushed.status == 1
    fixed = await run_cli("push", "items", "--partition", "fixed", *s, stdin="1\n2\n")
    assert fixed.status == 0 and {r["partition"] for r in fixed.lines()} == {"fixed"}
    bad_path = await run_cli("push", "items", "--partition-key", "$[", *s, stdin="1\n")
    assert bad_path.status == 2 and "--partition-key" in bad_path.err


async def test_push_waits_out_a_full_queue(http_url, client):
    await configure(client, "bounded", maxSize=1)
    await push(client, "bounded", "blocker")
    pusher = await trio.lowlevel.open_process(
        [EXECUTABLE, "push", "bounded", "--retries", "30", "--server", http_url],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env())
    await pusher.stdin.send_all(b'"waiting"\n')
    await pusher.stdin.aclose()
    err = b""
    with trio.fail_after(60):
        while b"retrying in 1 s" not in err:
            err += await pusher.stderr.receive_some(65536)
    assert b"queue full" in err
    assert [m["data"] for m in await everything(client, "bounded")] == ["blocker"]
    with trio.fail_after(60):
        assert await pusher.wait() == 0
    out = await pusher.stdout.receive_some(65536)
    assert json.loads(out)["status"] == "queued"
    assert [m["data"] for m in await everything(client, "bounded")] == ["waiting"]


async def test_pop_and_ack_speak_ndjson(http_url, client):
    await configure(client, "shop.mail")
    await push(client, "shop.mail", *range(4), partition="p1")
    await push(client, "other", "x")
    s = ("--server", http_url)
    popped = await run_cli("pop", "shop.mail", "-n", "3", "--group", "g", *s)
    messages = popped.lines()
    assert [m["data"] for m in messages] == [0, 1, 2]
    assert {m["queue"] for m in messages} == {"shop.mail"}
    assert set(messages[0]) >= {"id", "transactionId", "traceId", "data", "producerSub",
                                "createdAt", "partitionId", "partition", "leaseId",
                                "consumerGroup", "queue"}
    acked = await run_cli("ack", "--batch", "-", *s, "-o", "json", stdin=popped.out)
    assert acked.status == 0 and [r["success"] for r in acked.json()] == [True] * 3
    stale = await run_cli("ack", messages[0]["transactionId"], "--partition-id",
                          messages[0]["partitionId"], "--lease", messages[0]["leaseId"],
                          "--group", "g", *s)
    assert stale.status == 1 and "refused" in stale.err
    by_task, auto, one_partition, empty, not_lines = await gather(
        run_cli("pop", "--namespace", "shop", "--group", "t", "-n", "10", *s),
        run_cli("pop", "other", "--auto-ack", *s),
        run_cli("pop", "shop.mail", "--partition", "p1", *s),
        run_cli("pop", "shop.mail", "--group", "g", "--partition", "nope", *s),
        run_cli("ack", "--batch", "-", *s, stdin="{}\nnope\n"))
    assert [m["data"] for m in by_task.lines()] == [0, 1, 2, 3]
    (auto_message,) = auto.lines()
    assert auto_message["leaseId"] == "" and auto_message["data"] == "x"
    assert one_partition.lines()[0]["partition"] == "p1"
    assert empty.status == 4 and empty.out == ""
    assert not_lines.status == 1 and "line 1:" in not_lines.err and "line 2:" in not_lines.err

