"""`queen-trio` at a terminal (a pseudo-terminal): tables by default, colour and NO_COLOR,
delete confirmations, widths; shell completion; tokens; and what a serving process loads."""

from __future__ import annotations

import re
import time

import httpx
import jwt
import trio

from queen_trio.broker import open_broker
from queen_trio.settings import AuthSettings
from tests.support.brokers import make_settings, serve_on_port
from tests.support.cli import EXECUTABLE, cli_env, gather, in_terminal, run_cli
from tests.support.consuming import pop, push
from tests.support.processes import running_broker

SECRET = "cli-test-secret-with-enough-length-0123456789"


async def record_traces(client, *names: str) -> None:  # type: ignore[no-untyped-def]
    await push(client, "traced", *range(len(names)))
    reply = await pop(client, "traced", batch=len(names))
    for message, name in zip(reply["messages"], names, strict=True):
        r = await client.post("/api/v1/traces", json={
            "transactionId": message["transactionId"], "partitionId": message["partitionId"],
            "data": {"step": 1}, "traceNames": [name]})
        assert r.status_code == 201, r.text


async def test_a_terminal_gets_tables_colour_unless_no_color_and_a_question_before_delete(
        http_url, client):
    await record_traces(client, "flow-1")
    await push(client, "kept", 1)
    s = ("--server", http_url)
    (status, table), (_, plain), (declined, question) = await gather(
        in_terminal("traces", "names", *s),
        in_terminal("traces", "names", *s, env=cli_env(NO_COLOR="1")),
        in_terminal("queue", "delete", "kept", *s, typed=b"n\n"))
    assert "\x1b[1m" in table  # the header is bold
    table = re.sub(r"\x1b\[[0-9;]*m", "", table)
    assert status == 0 and table.split()[:2] == ["NAME", "EVENTS"] and "[" not in table
    assert "\x1b[" not in plain and plain.split()[:2] == ["NAME", "EVENTS"]
    assert "Delete queue kept and every message in it? [y/N]" in question
    assert declined == 1 and "nothing deleted" in question
    piped = await run_cli("traces", "names", *s)
    assert piped.json()[0]["trace_name"] == "flow-1"  # JSON when piped
    assert await pop(client, "kept") is not None  # still there
    yes = await in_terminal("queue", "delete", "kept", "--yes", *s)
    assert yes == (0, "queue kept deleted\n")


async def test_tables_fit_columns(http_url, client):
    await record_traces(client, *(f"a-rather-long-trace-name-for-a-narrow-terminal-{i}"
                                  for i in range(3)))
    done = await run_cli("traces", "names", "-o", "wide", "--server", http_url,
                         env=cli_env(COLUMNS="40"))
    lines = done.out.splitlines()
    assert len(lines) == 4 and max(len(line) for line in lines) <= 40
    assert "…" in done.out  # cut, not wrapped
    narrow = await run_cli("traces", "names", "--server", http_url, env=cli_env(COLUMNS="80"))
    assert max(len(line) for line in narrow.out.splitlines()) <= 80
    wide_open = await run_cli("traces", "names", "-o", "table", "--server", http_url)
    assert max(len(line) for line in wide_open.out.splitlines()) > 80  # piped: nothing cut


async def test_completion_scripts_load_in_bash_and_complete_commands():
    script = f'source <({EXECUTABLE} completion bash) && complete -p queen-trio'
    loaded = await trio.run_process(["bash", "-c", script], capture_stdout=True,
                                    capture_stderr=True, check=False, env=cli_env())
    assert loaded.returncode == 0, loaded.stderr
    assert b"queen-trio" in loaded.stdout
    asked = await trio.run_process([EXECUTABLE], capture_stdout=True, check=False, env=cli_env(
        COMP_WORDS="queen-trio qu", COMP_CWORD="1", _QUEEN_TRIO_COMPLETE="bash_complete"))
    assert "plain,queue" in asked.stdout.decode().splitlines()
    zsh, fish = await gather(run_cli("completion", "zsh"), run_cli("completion", "fish"))
    assert "#compdef queen-trio" in zsh.out and "_QUEEN_TRIO_COMPLETE" in fish.out


def token(role: str) -> str:
    return jwt.encode({"sub": "cli", "role": role, "exp": int(time.time()) + 300}, SECRET,
                      algorithm="HS256")


async def test_tokens_refused_and_a_context_token_kept_from_other_servers(database_url,
                                                                          http_url, tmp_path):
    auth = AuthSettings.from_env({"JWT_ENABLED": "true", "JWT_SECRET": SECRET})
    async with open_broker(make_settings(database_url, auth=auth), database_url) as broker, \
            trio.open_nursery() as nursery:
        (authed,) = await nursery.start(serve_on_port, broker)
        authed = str(authed)
        env = cli_env()
        good = token("admin")
        (tmp_path / "token").write_text(good + "\n")
        await run_cli("context", "set", "other", "--server", http_url, "--token", good, env=env)
        await run_cli("context", "set", "own", "--server", authed, "--token", good, env=env)
        none, bad, writer, flag, file, variable, other_context, own_context = await gather(
            run_cli("dlq", "list", "q", "--server", authed, env=env),
            run_cli("dlq", "list", "q", "--server", authed, "--token", "not-a-jwt", env=env),
            run_cli("dlq", "list", "q", "--server", authed, "--token", token("write-only"),
                    env=env),
            run_cli("dlq", "list", "q", "--server", authed, "--token", good, env=env),
            run_cli("dlq", "list", "q", "--server", authed, "--token-file",
                    str(tmp_path / "token"), env=env),
            run_cli("dlq", "list", "q", "--server", authed, env={**env, "QUEEN_TOKEN": good}),
            # The context names another server: its token is not sent to this one.
            run_cli("dlq", "list", "q", "--context", "other", "--server", authed, env=env),
            run_cli("dlq", "list", "q", "--context", "own", env=env))
        nursery.cancel_scope.cancel()
    for refused in (none, bad, writer, other_context):
        assert refused.status == 3, refused
        assert len(refused.err.splitlines()) == 1
    assert "401" in none.err and "403" in writer.err
    for accepted in (flag, file, variable, own_context):  # no dead letters: 4, not 3
        assert accepted.status == 4 and accepted.json() == [], accepted


async def test_a_serving_process_never_imports_the_client_libraries(database_url, workers):
    env = {"DATABASE_URL": database_url, "PYTHONPROFILEIMPORTTIME": "1"}
    async with running_broker(env, workers=workers) as broker, httpx.AsyncClient(base_url=broker.url) as c:
        assert (await c.post("/api/v1/push", json={"items": [
            {"queue": "q", "payload": 1}]})).status_code == 201
        assert (await c.get("/api/v1/pop/queue/q", params={"autoAck": "true"})).status_code \
            == 200
        assert (await c.get("/api/v1/dlq")).status_code == 200
    imported = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", broker.output(), re.M))
    assert {"click", "queen_trio.cli.serve", "queen_trio.web.server"} <= imported
    loaded = {name.split(".")[0] for name in imported}
    assert loaded.isdisjoint({"rich", "yaml", "httpx", "jsonpath_rfc9535"}), \
        loaded & {"rich", "yaml", "httpx", "jsonpath_rfc9535"}
