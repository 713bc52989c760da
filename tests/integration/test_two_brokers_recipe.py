"""docs/operations.md's recipe for a second broker on the first one's embedded PostgreSQL runs
as printed on one host (issue 25, point 7), and a second broker on a data directory in use is
told the fix."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import trio

from tests.support.processes import broker_env, free_port, refused_start, running_broker

OPERATIONS = Path(__file__).parents[2] / "docs" / "operations.md"


def recipe() -> str:
    """The shell block after "How to set it up." in docs/operations.md."""
    text = OPERATIONS.read_text().split("**How to set it up.**", 1)[1]
    return re.search(r"```sh\n(.*?)```", text, re.S)[1]


def start(script: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    """The recipe in bash, in a session of its own (so its broker can be signalled)."""
    with open(log, "wb") as output:
        return subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True,
                                stdout=output, stderr=subprocess.STDOUT)


def output_of(log: Path) -> str:
    return log.read_text(errors="replace")


async def healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    async with httpx.AsyncClient() as client:
        with trio.fail_after(60):
            while True:
                assert proc.poll() is None, f"the second broker exited: {output_of(log)}"
                try:
                    if (await client.get(url + "/health")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await trio.sleep(0.1)


async def test_the_two_broker_recipe_works_as_printed_on_one_host(cluster_path):
    # The user's environment: the default data directory, no FILE_BUFFER_DIR of ours.
    env = {k: v for k, v in broker_env({"XDG_DATA_HOME": str(cluster_path)}).items()
           if k not in ("FILE_BUFFER_DIR", "QUEEN_DATA_DIR")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    async with running_broker(env) as first:
        port = free_port()
        script = recipe().replace("6633", str(port))
        log = cluster_path / "second.log"
        second = start(script, env, log)
        try:
            await healthy(f"http://127.0.0.1:{port}", second, log)
            async with httpx.AsyncClient() as client:
                r = await client.post(f"http://127.0.0.1:{port}/api/v1/push", json={
                    "items": [{"queue": "shared", "payload": {"via": "second"}}]})
                assert r.json()[0]["status"] == "queued"
                r = await client.get(f"{first.url}/api/v1/pop/queue/shared")
                assert r.json()["messages"][0]["data"] == {"via": "second"}
        finally:
            os.killpg(second.pid, signal.SIGTERM)
            with trio.move_on_after(30):
                while second.poll() is None:
                    await trio.sleep(0.05)
            if second.poll() is None:
                os.killpg(second.pid, signal.SIGKILL)
            second.wait()
    assert (cluster_path / "queen-trio-2" / "broker.lock").exists()


async def test_a_data_directory_in_use_is_refused_with_the_fix(cluster_path, database_url):
    async with running_broker(args=["--data-dir", str(cluster_path)]):
        embedded = await refused_start({"QUEEN_DATA_DIR": str(cluster_path)},
                                       ["--port", str(free_port())])
        external = await refused_start({"QUEEN_DATA_DIR": str(cluster_path),
                                        "DATABASE_URL": database_url, "FILE_BUFFER_DIR": ""},
                                       ["--port", str(free_port())])
    for done in (embedded, external):
        assert done.returncode == 2
        assert "a broker is already running on this data directory" in done.stderr.decode()
    assert "its own --data-dir (or QUEEN_DATA_DIR)" in embedded.stderr.decode()
    assert "give it its own FILE_BUFFER_DIR, or its own --data-dir" in external.stderr.decode()
