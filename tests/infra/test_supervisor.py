"""supervisor: ServiceProcess lifecycle, and `spotter up` end to end with stand-in services."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spotter_cli.devstack import _pid_alive, find_free_port
from spotter_cli.supervisor import SERVICES, ServiceProcess, start_services, stop_services, wait_http_ok

PY = sys.executable


def test_output_is_prefixed_and_waitable():
    out = io.StringIO()
    p = ServiceProcess("spotter-demo", [PY, "-u", "-c", "import time; print('hello'); time.sleep(0.2); print('ready 42')"],
                       output=out).start()
    assert p.wait_for_output(r"ready \d+", timeout=10) == "ready 42"
    assert p.wait(10) == 0
    assert "        demo | hello" in out.getvalue()
    assert not p.died_unexpectedly() or p.returncode == 0


def test_terminate_escalates_to_sigkill():
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    p = ServiceProcess("stubborn", [PY, "-c", code], output=False).start()
    assert p.wait_for_output("up", timeout=10)
    t0 = time.monotonic()
    assert p.terminate(timeout=0.5) == -signal.SIGKILL
    assert time.monotonic() - t0 < 5
    assert not _pid_alive(p.pid)


def test_kill_and_restart_runs_same_command_again():
    p = ServiceProcess("svc", [PY, "-u", "-c", "import os, time; print('pid', os.getpid()); time.sleep(60)"],
                       output=False).start()
    assert p.wait_for_output("pid", timeout=10)
    first_pid, mark = p.pid, p.line_count
    assert p.kill() == -signal.SIGKILL
    assert not p.died_unexpectedly()  # we killed it on purpose
    p.start()
    assert p.wait_for_output(rf"pid {p.pid}", timeout=10, since=mark)
    assert p.pid != first_pid and p.starts == 2
    assert p.terminate(5) == -signal.SIGTERM


# ---------------------------------------------------------------- `spotter up` with stand-in executables

FAKE_SPOTTER = """
import os, sys, pathlib
d = pathlib.Path(os.environ["FAKE_DIR"])
cmd = sys.argv[1]
assert os.environ["DATABASE_URL"].startswith("postgresql://") and os.environ["NATS_URL"] and os.environ["REDIS_URL"]
if cmd == "token":
    print("token-for-" + sys.argv[2])
else:
    (d / cmd).write_text(os.environ["DATABASE_URL"])
    print(cmd, "done")
"""

FAKE_SERVICE = """
import http.server, os, pathlib, signal, sys, time
name = pathlib.Path(sys.argv[0]).name
d = pathlib.Path(os.environ["FAKE_DIR"])
(d / (name + ".pid")).write_text(str(os.getpid()))
(d / (name + ".env")).write_text(os.environ.get("ANTHROPIC_BASE_URL", ""))
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print(name, "started", flush=True)
port = {"spotter-gateway": "SPOTTER_HTTP_PORT", "spotter-sim": "SPOTTER_SIM_PORT"}.get(name)
die = os.environ.get("FAKE_DIE") == name
if port:
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/readyz" else 404); self.end_headers(); self.wfile.write(b"ok")
        def log_message(self, *a): pass
    http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ[port])), H).serve_forever()
if die:
    time.sleep(2)  # long enough for the gateway to be ready: the supervisor is in its watch loop
    print(name, "crashing", flush=True)
    sys.exit(3)
while True:
    time.sleep(0.5)
"""


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    b = tmp_path / "bin"
    b.mkdir()
    scripts = {"spotter": FAKE_SPOTTER, **{n: FAKE_SERVICE for n in ("spotter-sim", *SERVICES)}}
    for name, body in scripts.items():
        f = b / name
        f.write_text(f"#!{PY}\n" + textwrap.dedent(body))
        f.chmod(0o755)
    (tmp_path / "marks").mkdir()
    return b


def _up(fake_bin: Path, **extra_env: str) -> tuple[subprocess.Popen, int, dict]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NATS_URL", "DATABASE_URL", "REDIS_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    env.update(FAKE_DIR=str(fake_bin.parent / "marks"), PYTHONUNBUFFERED="1", **extra_env)
    http_port, sim_port = find_free_port(), find_free_port()
    proc = subprocess.Popen(
        [PY, "-m", "spotter_cli.supervisor", "up", "--ephemeral", "--bin-dir", str(fake_bin),
         "--http-port", str(http_port), "--sim-port", str(sim_port), "--ready-timeout", "30"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    return proc, http_port, {"sim_port": sim_port}


def _read_until(proc: subprocess.Popen, pattern: str, timeout: float = 40) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if re.search(pattern, line):
            return lines
    raise AssertionError(f"{pattern!r} not seen; output:\n" + "\n".join(lines))


def _server_pids(lines: list[str]) -> list[int]:
    return [int(m.group(1)) for line in lines if (m := re.search(r"\[devstack\] started .* pid (\d+) ", line))]


def test_up_runs_everything_and_stops_on_sigterm(fake_bin: Path):
    proc, http_port, ports = _up(fake_bin)
    try:
        lines = _read_until(proc, r"Ctrl-C to stop")
        text = "\n".join(lines)
        marks = fake_bin.parent / "marks"
        assert (marks / "migrate").exists() and (marks / "seed-demo").exists()
        assert "token-for-owner@demo.gym" in text and f"http://127.0.0.1:{http_port}" in text
        assert re.search(r"^\s+gateway \| spotter-gateway started", text, re.M)
        # the simulator is used and advertised to the services
        for n in SERVICES:
            assert (marks / f"{n}.env").read_text() == f"http://127.0.0.1:{ports['sim_port']}"
        wait_http_ok(f"http://127.0.0.1:{http_port}/readyz", timeout=5)
        children = [int((marks / f"{n}.pid").read_text()) for n in ("spotter-sim", *SERVICES)]
        servers = _server_pids(lines)
        assert len(servers) == 3
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, rest
        for pid in children + servers:
            assert not _pid_alive(pid), pid
    finally:
        if proc.poll() is None:
            proc.kill()


def test_up_exits_nonzero_when_a_child_dies(fake_bin: Path):
    proc, _, _ = _up(fake_bin, FAKE_DIE="spotter-billing")
    try:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 1, out
        assert "spotter-billing exited unexpectedly with code 3" in out
        marks = fake_bin.parent / "marks"
        for n in ("spotter-sim", *SERVICES):
            pid_file = marks / f"{n}.pid"
            if pid_file.exists():
                assert not _pid_alive(int(pid_file.read_text())), n
        for pid in _server_pids(out.splitlines()):
            assert not _pid_alive(pid)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_start_services_helper(fake_bin: Path):
    env = dict(os.environ, FAKE_DIR=str(fake_bin.parent / "marks"), SPOTTER_HTTP_PORT=str(find_free_port()),
               NATS_URL="nats://x", DATABASE_URL="postgresql://x", REDIS_URL="redis://x")
    procs = start_services(env, ["spotter-orchestrator", "spotter-gateway"], bin_dir=fake_bin, output=False)
    try:
        wait_http_ok(f"http://127.0.0.1:{env['SPOTTER_HTTP_PORT']}/readyz", timeout=20, watch=procs.values())
        orch = procs["spotter-orchestrator"]
        old, mark = orch.pid, orch.line_count
        orch.kill()
        orch.start()
        assert orch.wait_for_output("started", timeout=10, since=mark)
        assert orch.pid != old and orch.is_running()
    finally:
        codes = stop_services(procs)
    assert codes == {"spotter-gateway": 0, "spotter-orchestrator": 0}
