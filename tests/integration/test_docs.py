"""The README's "Try it" loop runs exactly as written, and docs/api.md has a runnable curl
command for every route of the router, with no placeholders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio

from queen_trio.web.routes import create_app

ROOT = Path(__file__).parents[2]
DOCUMENTED_URL = "http://localhost:6632"


def sh_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", markdown, re.S | re.M)


def section(markdown: str, heading: str) -> str:
    start = markdown.index(f"\n{heading}\n")
    end = markdown.find("\n## ", start + len(heading) + 2)
    return markdown[start:end if end != -1 else None]


def commands(block: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


async def bash(script: str, cwd: Path) -> str:
    done = await trio.run_process(["bash", "-c", script], cwd=cwd, capture_stdout=True,
                                  capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def test_the_readme_keeps_exactly_two_set_up_commands():
    blocks = sh_blocks(section((ROOT / "README.md").read_text(), "## Set up"))
    assert [len(commands(b)) for b in blocks] == [1, 1]
    assert "queen-trio serve" in blocks[0] and "pytest" in blocks[1]


async def test_the_readme_try_it_loop_runs_as_written_and_again(http_url, tmp_path):
    (block,) = sh_blocks(section((ROOT / "README.md").read_text(), "## Try it"))
    used = {c.split()[0] for c in commands(block)}
    assert "jq" not in block and used <= {"curl", "POPPED=$(curl", "echo", "ack_of()"}
    # Issue 25, point 8: the second run works as the first (no dedup, no empty pop).
    for run in (1, 2):
        out = (await bash(block.replace(DOCUMENTED_URL, http_url), tmp_path)).splitlines()
        configured, pushed, popped, acked, nacked, dlq, last_pop = out
        assert json.loads(configured)["options"]["retryLimit"] == 0
        assert [p["status"] for p in json.loads(pushed)] == ["queued", "queued"]
        assert json.loads(popped)["messages"][0]["data"] == {"orderId": 1}
        assert json.loads(acked)[0]["success"] is True
        assert json.loads(nacked)[0]["dlq"] is True
        dead = json.loads(dlq)
        assert dead["total"] == run
        assert [m["data"] for m in dead["messages"]] == [{"orderId": 2}] * run
        assert last_pop == "204"


async def test_the_readme_ack_helper_says_when_there_is_nothing_to_ack(http_url, tmp_path):
    (block,) = sh_blocks(section((ROOT / "README.md").read_text(), "## Try it"))
    helper = next(c for c in commands(block) if c.startswith("ack_of()"))
    done = await trio.run_process(
        ["bash", "-c", f"{helper}\ncurl -sS {http_url}/api/v1/pop/queue/none | ack_of failed"],
        cwd=tmp_path, capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 1
    assert done.stderr.decode() == "no message to ack: the pop answered 204\n"


def documented_curls() -> list[str]:
    page = (ROOT / "docs" / "api.md").read_text()
    return [c for block in sh_blocks(page) for c in commands(block) if c.startswith("curl ")]


def method_and_path(command: str) -> tuple[str, str]:
    explicit = re.search(r"-X (\w+)", command)
    method = explicit.group(1) if explicit else ("POST" if " -d " in command else "GET")
    url = re.search(re.escape(DOCUMENTED_URL) + r"([^'\s?]*)", command)
    assert url, command
    return method, url.group(1)


async def test_every_route_has_a_curl_command_in_the_api_page_without_placeholders(broker):
    router = create_app(broker).router
    curls = documented_curls()
    for command in curls:
        assert "..." not in command and not re.search(r"<[^>]*>", command), command
    covered = {router.resolve(*method_and_path(c))[0].path + " " + method_and_path(c)[0]
               for c in curls}
    missing = [f"{r.method} {r.path}" for r in router.routes
               if f"{r.path} {r.method}" not in covered]
    assert missing == [], "add a curl command for these routes to docs/api.md"


async def test_the_api_pages_curl_commands_run(http_url, tmp_path):
    """In page order (the push comes first, so the pops find a message): each one answers
    JSON (Prometheus text for /metrics/prometheus, a status and content type for the
    dashboard's files), or nothing for a 204, and none is a 500."""
    for command in documented_curls():
        out = await bash(command.replace(DOCUMENTED_URL, http_url), tmp_path)
        path = method_and_path(command)[1]
        if path == "/metrics/prometheus":
            assert out.startswith("# HELP queen_"), command
        elif path in ("/", "/favicon.ico") or path.startswith("/dashboard"):
            assert out.split()[:2] in (["200", "text/html;"], ["200", "text/javascript;"],
                                       ["200", "image/svg+xml"]), command
        elif out.strip():
            body = json.loads(out)
            assert not (isinstance(body, dict)
                        and str(body.get("error", "")).startswith("internal error")), command


async def test_the_readme_shows_parallel_consumers_on_partitions(http_url, tmp_path):
    # Issue 25, point 9: while A holds one partition, B gets another; a pop may take several.
    text = section((ROOT / "README.md").read_text(), "### What surprises newcomers")
    (block,) = sh_blocks(re.sub(r"^  ", "", text, flags=re.M))
    out = (await bash(block.replace(DOCUMENTED_URL, http_url), tmp_path)).splitlines()
    first, second, rest = (json.loads(line) for line in out)
    (a,), (b,), (c,) = first["messages"], second["messages"], rest["messages"]
    assert first["leaseId"] != second["leaseId"]
    assert len({a["partition"], b["partition"], c["partition"]}) == 3
    assert sorted(m["data"] for m in (a, b, c)) == [1, 2, 3]


def test_the_readme_first_screen_says_how_to_start_safely_and_what_works():
    # Issue 25: the two set-up commands, the loopback default, the worker example, and where
    # each 2.x surface stands, before the first walk-through.
    from queen_trio.web.routes.table import NOT_IN_THIS_BROKER

    text = (ROOT / "README.md").read_text()
    first = text[:text.index("\n## Try it\n")]
    set_up = section(text, "## Set up")
    assert "127.0.0.1" in set_up and "--require-database" in set_up
    assert "QUEEN_CORS_ORIGINS" in set_up
    assert "examples/worker.py" in first and "examples/producer.py" in first
    surfaces = section(text, "## Where each 2.x surface stands")
    for method, path in NOT_IN_THIS_BROKER:
        family = "/".join(path.split("/")[:4])  # /api/v1/timers, /streams/v1/cycle
        assert family in surfaces, (method, path)
