"""`spotter up`: the whole Spotter stack in the foreground, and helpers to run service processes.

``run_stack()`` starts the backing servers (:class:`spotter_cli.devstack.DevStack`), runs
``spotter migrate`` and ``spotter seed-demo``, starts the simulator (only when neither
``ANTHROPIC_API_KEY`` nor ``ANTHROPIC_BASE_URL`` is set) and the services, waits for the gateway's
``GET /readyz``, prints a login token and the URL, then streams every child's output prefixed by its
name until Ctrl-C / SIGTERM (exit 0) or until a child dies (everything is stopped, exit 1).

:class:`ServiceProcess` / :func:`start_services` / :func:`stop_services` are reusable by end-to-end
tests, e.g. to SIGKILL the orchestrator mid-turn and start it again::

    procs = start_services(env, ["spotter-orchestrator", "spotter-gateway"])
    wait_http_ok("http://127.0.0.1:8080/readyz", watch=procs.values())
    procs["spotter-orchestrator"].kill()          # SIGKILL, no clean-up
    procs["spotter-orchestrator"].start()         # same command and env again
    stop_services(procs)
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, TextIO, Union

from .devstack import DevStack, _setpriv_prefix, _wants_pdeathsig, find_free_port, port_is_free, repo_root

__all__ = [
    "SERVICES",
    "SIMULATOR",
    "ServiceProcess",
    "ChildDied",
    "start_services",
    "stop_services",
    "run_command",
    "wait_http_ok",
    "wait_tcp",
    "resolve_executable",
    "run_stack",
    "run_oneoff",
    "up_command",
    "main",
]

SIMULATOR = "spotter-sim"
# start order; stopped in reverse
SERVICES = ("spotter-tool-runner", "spotter-billing", "spotter-rag", "spotter-orchestrator", "spotter-gateway")
DEFAULT_HTTP_PORT = 8080
DEFAULT_SIM_PORT = 8090
DEMO_OWNER = "owner@demo.gym"

_print_lock = threading.Lock()


def log(msg: str) -> None:
    with _print_lock:
        print(f"[spotter up] {msg}", file=sys.stderr, flush=True)


class ChildDied(RuntimeError):
    def __init__(self, name: str, returncode: Optional[int]):
        super().__init__(f"{name} exited unexpectedly with code {returncode}")
        self.name = name
        self.returncode = returncode


def resolve_executable(name: str, bin_dir: Union[str, os.PathLike, None] = None) -> str:
    """A console script: ``bin_dir`` / $SPOTTER_BIN_DIR, else the running venv's bin/, else PATH."""
    dirs = [bin_dir, os.environ.get("SPOTTER_BIN_DIR"), Path(sys.executable).parent]
    for d in dirs:
        if d:
            c = Path(d) / name
            if c.is_file() and os.access(c, os.X_OK):
                return str(c)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"{name}: not found in the venv or PATH (run scripts/bootstrap.sh)")


def _label(name: str) -> str:
    return name[len("spotter-"):] if name.startswith("spotter-") else name


class ServiceProcess:
    """A child process whose output (stdout+stderr) is streamed line by line, prefixed with its name, to
    ``output`` (default ``sys.stdout``; ``False`` to keep it only in memory / ``log_path``).

    The child gets its own session (process group); stop/kill signal the whole group. When started from
    the main thread it also dies with this Python process (``setpriv --pdeathsig``).
    """

    def __init__(
        self,
        name: str,
        argv: Optional[list[str]] = None,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Union[str, os.PathLike, None] = None,
        output: Union[TextIO, None, bool] = None,
        log_path: Union[str, os.PathLike, None] = None,
        bin_dir: Union[str, os.PathLike, None] = None,
        label: Optional[str] = None,
        die_with_parent: Optional[bool] = None,
        keep_lines: int = 2000,
    ):
        self.name = name
        self.argv = list(argv) if argv else [resolve_executable(name, bin_dir)]
        self.env = dict(env) if env is not None else dict(os.environ)
        self.cwd = str(cwd) if cwd else None
        self.output = output
        self.log_path = Path(log_path) if log_path else None
        self.label = label or _label(name)
        self.die_with_parent = die_with_parent
        self.proc: Optional[subprocess.Popen] = None
        self.lines: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self.line_count = 0  # total lines seen (across restarts); see wait_for_output(since=)
        self.stopping = False  # True when the stop/kill was ours
        self.starts = 0
        self._cond = threading.Condition()
        self._reader: Optional[threading.Thread] = None

    def __repr__(self) -> str:
        return f"<ServiceProcess {self.name} pid={self.pid} rc={self.returncode}>"

    # -- state
    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    @property
    def returncode(self) -> Optional[int]:
        return self.proc.poll() if self.proc else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def died_unexpectedly(self) -> bool:
        return self.proc is not None and not self.stopping and self.proc.poll() is not None

    # -- lifecycle
    def start(self) -> "ServiceProcess":
        if self.is_running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        if self._reader is not None:
            self._reader.join(2)
        prefix = _setpriv_prefix(pdeathsig="TERM" if _wants_pdeathsig(self.die_with_parent) else None, user=None)
        self.stopping = False
        self.proc = subprocess.Popen(
            prefix + self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
            env=self.env,
            start_new_session=True,
        )
        self.starts += 1
        self._reader = threading.Thread(target=self._pump, args=(self.proc,), name=f"out-{self.label}", daemon=True)
        self._reader.start()
        return self

    def _emit(self, line: str) -> None:
        if self.output is False:
            return
        stream = self.output if self.output not in (None, True) else sys.stdout
        with _print_lock:
            try:
                stream.write(f"{self.label:>12} | {line}\n")  # type: ignore[union-attr]
                stream.flush()  # type: ignore[union-attr]
            except (ValueError, OSError):
                pass

    def _pump(self, proc: subprocess.Popen) -> None:
        logf = open(self.log_path, "a", buffering=1) if self.log_path else None
        try:
            assert proc.stdout is not None
            for raw in iter(proc.stdout.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self._cond:
                    self.lines.append(line)
                    self.line_count += 1
                    self._cond.notify_all()
                self._emit(line)
                if logf:
                    logf.write(line + "\n")
        finally:
            if proc.stdout:
                proc.stdout.close()
            if logf:
                logf.close()
            with self._cond:
                self._cond.notify_all()

    def send_signal(self, sig: int) -> None:
        """Signal the child's process group (falls back to the child alone)."""
        if not self.proc or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Wait for exit; the exit code, or None on timeout. Also drains the output."""
        if not self.proc:
            return None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        if self._reader:
            self._reader.join(5)
        return rc

    def terminate(self, timeout: float = 10.0) -> Optional[int]:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Returns the exit code."""
        if not self.proc:
            return None
        self.stopping = True
        if self.proc.poll() is None:
            self.send_signal(signal.SIGTERM)
            if self.wait(timeout) is None:
                log(f"{self.name} did not stop within {timeout:.0f}s: SIGKILL")
                self.send_signal(signal.SIGKILL)
        else:  # leader gone: make sure nothing of its group lingers
            self.send_signal(signal.SIGKILL)
        return self.wait(10)

    stop = terminate

    def kill(self) -> Optional[int]:
        """SIGKILL at once (no graceful shutdown) — e.g. to crash a service mid-request in a test."""
        if not self.proc:
            return None
        self.stopping = True
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        return self.wait(10)

    def restart(self, timeout: float = 10.0) -> "ServiceProcess":
        self.terminate(timeout)
        return self.start()

    # -- output
    def output_text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def wait_for_output(self, pattern: Union[str, "re.Pattern[str]"], timeout: float = 30.0,
                        since: Optional[int] = None) -> Optional[str]:
        """Wait until a line matching ``pattern`` (regex) appears; return it, or None on timeout / exit.
        ``since``: a previous ``line_count`` — only lines printed after it count."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                start = 0 if since is None else max(0, len(self.lines) - (self.line_count - since))
                for line in list(self.lines)[start:]:
                    if rx.search(line):
                        return line
                left = deadline - time.monotonic()
                reader_done = self._reader is None or not self._reader.is_alive()
                if left <= 0 or (reader_done and not self.is_running()):
                    return None
                self._cond.wait(min(left, 0.5))


# --------------------------------------------------------------------------- helpers for groups of services


def start_services(
    env: Mapping[str, str],
    names: Iterable[str] = SERVICES,
    *,
    cwd: Union[str, os.PathLike, None] = None,
    output: Union[TextIO, None, bool] = None,
    bin_dir: Union[str, os.PathLike, None] = None,
    log_dir: Union[str, os.PathLike, None] = None,
) -> dict[str, ServiceProcess]:
    """Start the named console scripts (in order) with ``env``; returns {name: ServiceProcess} in start
    order. If one cannot be started, those already started are stopped and the error raised."""
    procs: dict[str, ServiceProcess] = {}
    try:
        for name in names:
            lp = Path(log_dir) / f"{_label(name)}.log" if log_dir else None
            procs[name] = ServiceProcess(name, env=env, cwd=cwd, output=output, bin_dir=bin_dir, log_path=lp).start()
    except BaseException:
        stop_services(procs)
        raise
    return procs


def stop_services(procs: Union[Mapping[str, ServiceProcess], Iterable[ServiceProcess]], timeout: float = 10.0) -> dict[str, Optional[int]]:
    """SIGTERM all (reverse start order) at once, wait up to ``timeout`` s in total, SIGKILL the rest."""
    items = list(procs.values()) if isinstance(procs, Mapping) else list(procs)
    items.reverse()
    for p in items:
        p.stopping = True
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in items:
        if p.proc is not None and p.wait(max(0.0, deadline - time.monotonic())) is None:
            log(f"{p.name} did not stop within {timeout:.0f}s: SIGKILL")
            p.kill()
        elif p.proc is not None:
            p.send_signal(signal.SIGKILL)  # leftovers of its process group, if any
            p.wait(5)
    return {p.name: p.returncode for p in items}


def _check_watch(watch: Iterable[ServiceProcess]) -> None:
    for p in watch:
        if p.died_unexpectedly():
            raise ChildDied(p.name, p.returncode)


def wait_http_ok(url: str, *, timeout: float = 60.0, watch: Iterable[ServiceProcess] = (),
                 stop_event: Optional[threading.Event] = None, interval: float = 0.2) -> None:
    """Poll ``GET url`` until it answers 200. Raises ChildDied if a watched process exits, TimeoutError."""
    watch = list(watch)
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        _check_watch(watch)
        if stop_event is not None and stop_event.is_set():
            raise InterruptedError("stopped")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
                last = f"HTTP {r.status}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}"
        except (urllib.error.URLError, OSError) as e:
            last = str(getattr(e, "reason", e))
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} not 200 after {timeout:.0f}s (last: {last})")
        time.sleep(interval)


def wait_tcp(host: str, port: int, *, timeout: float = 30.0, watch: Iterable[ServiceProcess] = (),
             stop_event: Optional[threading.Event] = None) -> None:
    watch = list(watch)
    deadline = time.monotonic() + timeout
    while True:
        _check_watch(watch)
        if stop_event is not None and stop_event.is_set():
            raise InterruptedError("stopped")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{host}:{port} not listening after {timeout:.0f}s")
        time.sleep(0.1)


def run_command(name: str, args: Iterable[str] = (), *, env: Optional[Mapping[str, str]] = None,
                cwd: Union[str, os.PathLike, None] = None, output: Union[TextIO, None, bool] = None,
                bin_dir: Union[str, os.PathLike, None] = None, label: Optional[str] = None,
                timeout: Optional[float] = None) -> ServiceProcess:
    """Run ``name args...`` to completion, streaming its output; returns the finished ServiceProcess
    (``.returncode``, ``.output_text()``). On timeout it is stopped and returncode is its signal code."""
    p = ServiceProcess(name, [resolve_executable(name, bin_dir), *args], env=env, cwd=cwd, output=output,
                       label=label or " ".join([_label(name), *list(args)[:1]]))
    p.start()
    if p.wait(timeout) is None:
        log(f"{p.label}: timed out after {timeout}s")
        p.terminate()
    return p


# --------------------------------------------------------------------------- spotter up


class _Interrupted(Exception):
    pass


def _choose_port(var: str, default: int, explicit: Optional[int]) -> int:
    """Explicit (argument or env var) ports are used as given; the default moves if it is busy."""
    if explicit:
        return explicit
    if os.environ.get(var):
        return int(os.environ[var])
    if port_is_free(default):
        return default
    port = find_free_port()
    log(f"port {default} is busy: using {port} for {var}")
    return port


def run_stack(
    *,
    ephemeral: bool = False,
    http_port: Optional[int] = None,
    sim_port: Optional[int] = None,
    bin_dir: Union[str, os.PathLike, None] = None,
    cwd: Union[str, os.PathLike, None] = None,
    state_dir: Union[str, os.PathLike, None] = None,
    token_email: str = DEMO_OWNER,
    output: Union[TextIO, None, bool] = None,
    ready_timeout: float = 120.0,
    stop_event: Optional[threading.Event] = None,
    install_signal_handlers: bool = True,
    on_ready: Optional[Callable[[dict[str, str]], None]] = None,
) -> int:
    """Run the whole stack in the foreground until Ctrl-C/SIGTERM (returns 0) or a failure (returns
    non-zero). ``stop_event`` lets a caller in another thread stop it; ``on_ready(env)`` is called once the
    gateway is ready. Servers come from NATS_URL/DATABASE_URL/REDIS_URL when set."""
    cwd = Path(cwd) if cwd else repo_root()
    stop_event = stop_event or threading.Event()
    flags = {"cleanup": False}
    old_handlers: dict[int, object] = {}

    def on_signal(signum, _frame):
        if flags["cleanup"] or stop_event.is_set():
            log(f"got {signal.Signals(signum).name} again: still stopping")
            return
        log(f"got {signal.Signals(signum).name}: stopping")
        stop_event.set()
        raise _Interrupted()

    if install_signal_handlers and threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            old_handlers[s] = signal.signal(s, on_signal)

    stack: Optional[DevStack] = None
    procs: dict[str, ServiceProcess] = {}
    rc = 0
    try:
        stack = DevStack(ephemeral=ephemeral, root=state_dir)
        urls = stack.start()
        env = dict(os.environ)
        env.update(urls.as_env())
        env["PYTHONUNBUFFERED"] = "1"
        env["SPOTTER_REPO_ROOT"] = str(cwd)
        port = _choose_port("SPOTTER_HTTP_PORT", DEFAULT_HTTP_PORT, http_port)
        env["SPOTTER_HTTP_PORT"] = str(port)

        for args in (["migrate"], ["seed-demo"]):
            p = run_command("spotter", args, env=env, cwd=cwd, output=output, bin_dir=bin_dir)
            if p.returncode != 0:
                log(f"`spotter {' '.join(args)}` failed with code {p.returncode}")
                return p.returncode or 1

        use_sim = not env.get("ANTHROPIC_API_KEY") and not env.get("ANTHROPIC_BASE_URL")
        if use_sim:
            sport = _choose_port("SPOTTER_SIM_PORT", DEFAULT_SIM_PORT, sim_port)
            env["SPOTTER_SIM_PORT"] = str(sport)
            env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{sport}"
            env.setdefault("ANTHROPIC_API_KEY", "sk-ant-simulator")  # the SDK insists on a key
            procs[SIMULATOR] = ServiceProcess(SIMULATOR, env=env, cwd=cwd, output=output, bin_dir=bin_dir).start()
            wait_tcp("127.0.0.1", sport, timeout=60, watch=procs.values(), stop_event=stop_event)
            log(f"no ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL: using the simulator at {env['ANTHROPIC_BASE_URL']}")
        for name in SERVICES:
            procs[name] = ServiceProcess(name, env=env, cwd=cwd, output=output, bin_dir=bin_dir).start()

        base = f"http://127.0.0.1:{port}"
        wait_http_ok(f"{base}/readyz", timeout=ready_timeout, watch=procs.values(), stop_event=stop_event)

        tok = run_command("spotter", ["token", token_email], env=env, cwd=cwd, output=False, bin_dir=bin_dir, timeout=60)
        token_lines = [line for line in tok.output_text().splitlines() if line.strip()]
        token = token_lines[-1].strip() if tok.returncode == 0 and token_lines else None
        banner = ["", "=" * 72, f"  Spotter is up:  {base}",
                  f"  Studio app:     open {base}/ in a browser and pick a demo user ({token_email} is the owner)"]
        if token:
            banner += [f"  Login token for {token_email}:", f"  {token}"]
        else:
            banner += [f"  (`spotter token {token_email}` failed with code {tok.returncode}: {tok.output_text()[-300:]})"]
        banner += [f"  {k}={v}" for k, v in urls.as_env().items()]
        banner += ["  Ctrl-C to stop.", "=" * 72, ""]
        with _print_lock:
            print("\n".join(banner), flush=True)
        if on_ready:
            on_ready(env)

        while not stop_event.wait(0.2):
            for p in procs.values():
                if p.died_unexpectedly():
                    raise ChildDied(p.name, p.returncode)
            if stack is not None:
                dead = [k for k, s in stack.servers.items() if not s.is_running()]
                if dead:
                    raise ChildDied(dead[0], stack.servers[dead[0]].proc.poll())  # type: ignore[union-attr]
    except (_Interrupted, KeyboardInterrupt, InterruptedError):
        rc = 0
    except ChildDied as e:
        log(f"{e}; stopping everything")
        rc = 1
    except Exception as e:  # startup failures: say what, stop what was started
        log(f"error: {type(e).__name__}: {e}")
        rc = 1
    finally:
        flags["cleanup"] = True
        if procs:
            codes = stop_services(procs)
            log("stopped services: " + ", ".join(f"{_label(k)}={v}" for k, v in codes.items()))
        if stack is not None:
            stack.stop()
        for s, h in old_handlers.items():
            signal.signal(s, h)  # type: ignore[arg-type]
    return rc


def run_oneoff(args: list[str], *, bin_dir: Union[str, os.PathLike, None] = None) -> int:
    """Run one command (e.g. ``spotter migrate``) with the dev stack's URLs in its env: servers already
    running for ``.spotter/`` (a ``make up``) are reused, missing ones started for the command only."""
    if not args:
        raise ValueError("no command")
    stack = DevStack()
    try:
        env = dict(os.environ)
        env.update(stack.start().as_env())
        p = run_command(args[0], args[1:], env=env, cwd=repo_root(), output=sys.stdout, bin_dir=bin_dir,
                        label=" ".join([_label(args[0]), *args[1:2]]))
        return p.returncode if p.returncode is not None else 1
    except KeyboardInterrupt:
        return 130
    finally:
        stack.stop()


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="spotter up", description="Run the whole Spotter stack in the foreground.")
    ap.add_argument("--ephemeral", action="store_true", help="throw-away servers in a temp dir on free ports")
    ap.add_argument("--http-port", type=int, help=f"gateway port (default $SPOTTER_HTTP_PORT or {DEFAULT_HTTP_PORT})")
    ap.add_argument("--sim-port", type=int, help=f"simulator port (default $SPOTTER_SIM_PORT or {DEFAULT_SIM_PORT})")
    ap.add_argument("--state-dir", help="where the servers keep their data (default <repo>/.spotter)")
    ap.add_argument("--bin-dir", help="where to find the console scripts (default: the venv's bin/)")
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    return ap


def up_command(argv: Optional[list[str]] = None) -> int:
    """Entry point for ``spotter up`` (argv without the ``up``; default: sys.argv after ``up``)."""
    if argv is None:
        argv = sys.argv[1:]
        if argv and argv[0] == "up":
            argv = argv[1:]
    a = _parser().parse_args(argv)
    return run_stack(ephemeral=a.ephemeral, http_port=a.http_port, sim_port=a.sim_port, state_dir=a.state_dir,
                     bin_dir=a.bin_dir, ready_timeout=a.ready_timeout)


def main(argv: Optional[list[str]] = None) -> None:
    """``python -m spotter_cli.supervisor [up ...]`` or ``python -m spotter_cli.supervisor run -- CMD ...``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        rest = argv[1:]
        if rest and rest[0] == "--":
            rest = rest[1:]
        sys.exit(run_oneoff(rest))
    if argv and argv[0] == "up":
        argv = argv[1:]
    sys.exit(up_command(argv))


if __name__ == "__main__":
    main()
