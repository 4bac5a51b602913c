"""A subset of the platform for one benchmark: ephemeral NATS/Postgres/Redis (or the servers named by
NATS_URL / DATABASE_URL / REDIS_URL, as DevStack does), migrations, and only the services asked for
(several replicas of one allowed). No demo seed and no simulator: the fan-out and settlement benches
make their own organization and rows. Quacks like bench_platform.Platform where they need it
(`env`, `gateway_url`, `pids()`, `dead()`, `close()`)."""

from __future__ import annotations

import asyncio
import os
import resource
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from bench_stats import cpu_delta, cpu_snapshot
from spotter_cli.devstack import DevStack, find_free_port, repo_root
from spotter_cli.supervisor import ServiceProcess, run_command, stop_services, wait_http_ok


def say(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def raise_nofile() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (children started afterwards inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@dataclass
class SubStack:
    services: dict[str, int]  # console script -> replicas, in start order
    log_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    stack: Optional[DevStack] = None
    procs: dict[str, ServiceProcess] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    gateway_url: str = ""

    def start(self) -> "SubStack":
        root = repo_root()
        raise_nofile()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for old in self.log_dir.glob("*.log"):
            old.unlink()
        self.stack = DevStack(ephemeral=True)
        urls = self.stack.start()
        http_port = find_free_port()
        self.gateway_url = f"http://127.0.0.1:{http_port}"
        self.env = {
            **os.environ,
            **urls.as_env(),
            "PYTHONUNBUFFERED": "1",
            "SPOTTER_REPO_ROOT": str(root),
            "SPOTTER_HTTP_PORT": str(http_port),
            **self.extra_env,
        }
        p = run_command("spotter", ["migrate"], env=self.env, cwd=root, output=False, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"`spotter migrate` failed ({p.returncode}):\n{p.output_text()[-2000:]}")
        for name, replicas in self.services.items():
            self.add(name, replicas)
        if "spotter-gateway" in self.services:
            wait_http_ok(f"{self.gateway_url}/readyz", timeout=90, watch=self.procs.values())
        return self

    def add(self, name: str, replicas: int = 1, *, argv: Optional[list[str]] = None,
            env: Optional[dict[str, str]] = None) -> list[ServiceProcess]:
        """Start `replicas` more processes of a service (keys: billing, billing-2, …); `argv` runs
        another command under the service's name (bench what-ifs)."""
        started = []
        label = name.removeprefix("spotter-")
        for _ in range(replicas):
            n = sum(1 for k in self.procs if k == label or k.startswith(label + "-"))
            key = label if n == 0 else f"{label}-{n + 1}"
            proc = ServiceProcess(name, argv=argv, env={**self.env, **(env or {})}, cwd=repo_root(), output=False,
                                  label=key, log_path=self.log_dir / f"{key}.log").start()
            self.procs[key] = proc
            started.append(proc)
        return started

    def pids(self) -> dict[str, Optional[int]]:
        roots: dict[str, Optional[int]] = {k: p.pid for k, p in self.procs.items()}
        if self.stack is not None:
            roots.update({k: s.pid for k, s in self.stack.servers.items()})
        return roots

    def dead(self) -> list[str]:
        out = [f"{k} (exit {p.returncode})" for k, p in self.procs.items() if p.died_unexpectedly()]
        if self.stack is not None:
            out += [f"{k} server" for k, s in self.stack.servers.items() if not s.is_running()]
        return out

    def output(self, key: str) -> str:
        p = self.procs.get(key)
        return p.output_text() if p else ""

    def stop_service(self, label: str) -> None:
        """Stop every replica of one service (keys `label`, `label-2`, …)."""
        keys = [k for k in self.procs if k == label or k.startswith(label + "-")]
        stop_services({k: self.procs.pop(k) for k in keys})

    def close(self) -> None:
        if self.procs:
            stop_services(self.procs)
            self.procs = {}
        if self.stack is not None:
            self.stack.stop()
            self.stack = None


async def wait_nats_responder(nats_url: str, subject: str, payload: bytes, timeout: float = 60.0) -> None:
    """Until something answers requests on `subject` (any reply, an error reply included)."""
    import nats
    from nats.errors import NoRespondersError, TimeoutError as NatsTimeout

    nc = await nats.connect(nats_url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                await nc.request(subject, payload, timeout=1.0)
                return
            except (NoRespondersError, NatsTimeout, asyncio.TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nothing answers on {subject} after {timeout:.0f}s") from None
                await asyncio.sleep(0.2)
    finally:
        await nc.close()


# --------------------------------------------------------------------------- /proc readings


def rss_kb(pid: int) -> Optional[int]:
    """VmRSS of one process, in KiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def new_name(prefix: str) -> str:
    return f"{prefix} {time.strftime('%H%M%S')} {uuid.uuid4().hex[:6]}"


# --------------------------------------------------------------------------- CPU


def _cores(delta: dict[str, float], wall: float) -> dict[str, float]:
    return {k: round(v / wall, 2) for k, v in sorted(delta.items(), key=lambda kv: -kv[1]) if v > 0.005}


class CpuWatch:
    """CPU seconds of the named process trees, of this process alone (the publisher: its children, the
    services and clients, are counted under their own names), and of the whole machine (/proc/stat),
    so that what else ran on the machine meanwhile is reported too."""

    def __init__(self, roots: dict[str, Optional[int]], self_name: str = "bench") -> None:
        self.roots = roots
        self.self_name = self_name

    @staticmethod
    def _machine() -> float:
        with open("/proc/stat") as f:
            parts = f.readline().split()[1:]
        v = [int(x) for x in parts]
        busy = sum(v) - v[3] - (v[4] if len(v) > 4 else 0)  # all but idle and iowait
        return busy / os.sysconf("SC_CLK_TCK")

    def snapshot(self) -> tuple[float, dict[str, float], float, float]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return time.perf_counter(), cpu_snapshot(self.roots), ru.ru_utime + ru.ru_stime, self._machine()

    def since(self, before: tuple[float, dict[str, float], float, float]) -> dict[str, float]:
        t1, procs1, self1, machine1 = self.snapshot()
        t0, procs0, self0, machine0 = before
        wall = max(1e-9, t1 - t0)
        delta = cpu_delta(procs0, procs1)
        delta[self.self_name] = max(0.0, self1 - self0)
        ours = sum(delta.values())
        delta["other processes on the machine"] = max(0.0, (machine1 - machine0) - ours)
        return _cores(delta, wall)
