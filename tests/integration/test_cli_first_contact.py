"""What made a newcomer hesitate at the command line (issue 25, points 10 and 12): counts that
add up, flags before the command, `tail --from-start`, an empty pop that says so on a
terminal, queue mode by its name in tables."""

from __future__ import annotations

from tests.support.cli import cli_env, gather, in_terminal, run_cli
from tests.support.consuming import ack_batch, configure, pop, push


def table(out: str) -> list[dict[str, str]]:
    """A table's rows as dicts of its headers (single-word cells)."""
    header, *rows = out.splitlines()
    return [dict(zip(header.split(), row.split(), strict=True)) for row in rows]


async def test_the_counts_of_a_queue_add_up_in_every_table(http_url, client):
    # Six messages; queue mode completes one, group "b" dead-letters one, one is in flight.
    await configure(client, "cnt", retryLimit=0)
    await push(client, "cnt", *range(6), partition="p")
    done = await pop(client, "cnt")
    await ack_batch(client, done["messages"])
    dead = await pop(client, "cnt", consumerGroup="b")
    await ack_batch(client, dead["messages"], group="b", status="failed")
    await pop(client, "cnt", consumerGroup="c")  # leased to c: in flight
    s = ("--server", http_url)
    listed, status, described = await gather(
        run_cli("queue", "list", *s, "-o", "table"), run_cli("status", *s, "-o", "table"),
        run_cli("queue", "describe", "cnt", *s, "-o", "table"))
    (row,) = table(listed.out)
    assert int(row["TOTAL"]) == 6
    assert int(row["PENDING"]) + int(row["PROCESSING"]) + int(row["CONSUMED"]) == 6
    assert row["DLQ"] == "1"
    for record in (status.out, described.out):
        fields = dict(line.rsplit(None, 1) for line in record.splitlines()
                      if line[:1].isalpha() and len(line.split()) >= 2)
        assert int(fields["total"]) == (int(fields["pending"]) + int(fields["processing"])
                                        + int(fields["consumed"]))
        assert fields["dead letters (every group)"] == "1"
    assert "in flight (every group)" in status.out


async def test_connection_flags_may_come_before_the_command(http_url, client):
    await push(client, "early", 1)
    before, after, both = await gather(
        run_cli("--server", http_url, "queue", "list", "-o", "name"),
        run_cli("queue", "list", "--server", http_url, "-o", "name"),
        # The command's own flag wins over the one before it.
        run_cli("--server", "http://127.0.0.1:9", "queue", "list", "--server", http_url,
                "-o", "name"))
    assert before.status == 0 and before.out == after.out == both.out == "early\n"


async def test_tail_from_start_prints_what_the_queue_holds(http_url, client):
    await push(client, "held", "a", "b")
    s = ("--server", http_url)
    new_only, from_start, refused = await gather(
        run_cli("tail", "held", *s), run_cli("tail", "held", "--from-start", *s),
        run_cli("tail", "held", "--from-start", "--group", "g", *s))
    assert (new_only.status, new_only.out) == (0, "")  # a tail reads new messages
    assert [m["data"] for m in from_start.lines()] == ["a", "b"]
    assert refused.status == 2 and "--subscription-mode all" in refused.err
    assert [m["data"] for m in (await pop(client, "held", batch=5))["messages"]] == ["a", "b"]


async def test_an_empty_pop_says_so_on_a_terminal_only(http_url, client):
    await push(client, "empty", 1)
    await pop(client, "empty")  # leased: nothing left to pop
    (status, screen), piped = await gather(
        in_terminal("pop", "empty", "--server", http_url, env=cli_env()),
        run_cli("pop", "empty", "--server", http_url))
    assert status == 4 and screen == "queen-trio pop: no message\n"
    assert (piped.status, piped.out, piped.err) == (4, "", "")


async def test_queue_mode_is_named_in_tables_and_kept_in_json(http_url, client):
    await push(client, "qm", 1)
    await pop(client, "qm")
    s = ("--server", http_url)
    shown, kept, names = await gather(run_cli("group", "list", *s, "-o", "table"),
                                      run_cli("group", "list", *s, "-o", "json"),
                                      run_cli("group", "list", *s, "-o", "name"))
    assert shown.out.splitlines()[1].startswith("queue mode ")
    assert "__QUEUE_MODE__" not in shown.out
    assert [g["name"] for g in kept.json()] == ["__QUEUE_MODE__"]
    assert names.out == "__QUEUE_MODE__\n"
