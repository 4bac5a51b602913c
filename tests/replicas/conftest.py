"""Many replicas (issue 14): two of every service — gateway, orchestrator, tool-runner, billing and
rag — plus one model simulator, as separate processes against one NATS, Postgres and Redis.

The module gets its own cluster (`cluster`, module-scoped), never the single-replica `platform` of
tests/platform.py. Postgres and Redis are the session's (tests/conftest.py: `stack`, `db_url`); NATS
is a server of the cluster's own, because a session that also runs tests/e2e keeps the platform's
services connected to the session's NATS until the end, and they would join the same durable
consumers and queue groups (and answer with another simulator).

A replica is *ready* when NATS sees it subscribed: every NATS service's connection, as listed by
the server's monitor (`/connz?subs=1`), holds the same subjects its twin holds; a gateway also
answers `/readyz`. What each replica did is read from its own log: the services write seed 000's
observability events as one JSON line each (`spotter_shared.telemetry.event`), e.g.
`agent.turn.started` (orchestrator) and `agent.tool.executed` (tool-runner), with the organization.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from spotter_cli.devstack import NatsServerProcess, StackUrls, find_free_port
from spotter_cli.supervisor import SIMULATOR, ServiceProcess, stop_services, wait_http_ok
from tests.e2e.client import Sim
from tests.platform import _wait_for_responders, service_env

# Start order (as spotter_cli.supervisor.SERVICES): the gateway last, behind what it talks to.
KINDS = ("tool-runner", "billing", "rag", "orchestrator", "gateway")
REPLICAS = 2
# The name each service gives its NATS connection (spotter_shared.bus.create_broker's `name`).
CONNECTION_NAMES = {
    "tool-runner": "tool-runner",
    "billing": "spotter-billing",
    "rag": "spotter-rag",
    "orchestrator": "orchestrator",
    "gateway": "gateway",
}
READY_TIMEOUT_S = 90.0
_EVENT_LINE = re.compile(r'(\{"event": .*\})\s*$')


@dataclass
class Replica:
    kind: str
    index: int  # 1 or 2
    proc: ServiceProcess
    log_path: Path
    http_port: int | None = None  # the gateway's

    @property
    def label(self) -> str:
        return f"{self.kind}-{self.index}"

    @property
    def url(self) -> str:
        assert self.http_port is not None, f"{self.label} serves no HTTP"
        return f"http://127.0.0.1:{self.http_port}"

    def events(self, name: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """The observability events this replica logged (over all its starts), oldest first; only
        those called `name` and whose fields equal `match`, when given."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return []
        found = []
        for line in text.splitlines():
            m = _EVENT_LINE.search(line)
            if not m:
                continue
            try:
                event = json.loads(m.group(1))
            except ValueError:
                continue
            if (name is None or event.get("event") == name) and all(event.get(k) == v for k, v in match.items()):
                found.append(event)
        return found

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""


@dataclass
class Cluster:
    env: dict[str, str]
    nats: NatsServerProcess
    sim_url: str
    sim_proc: ServiceProcess
    replicas: dict[str, list[Replica]]
    log_dir: Path
    # Per kind, the subjects (inboxes left out) a ready replica's NATS connection subscribes to,
    # learnt when the cluster first came up.
    subjects: dict[str, frozenset[str]] = field(default_factory=dict)

    def of(self, kind: str) -> list[Replica]:
        return self.replicas[kind]

    @property
    def gateways(self) -> list[Replica]:
        return self.replicas["gateway"]

    def all_procs(self) -> list[ServiceProcess]:
        return [self.sim_proc] + [r.proc for kind in KINDS for r in self.replicas[kind]]

    def dead(self) -> list[str]:
        return [f"{r.label} (rc {r.proc.returncode})" for kind in KINDS for r in self.replicas[kind] if r.proc.died_unexpectedly()]

    # -- NATS's view of the replicas
    def connections(self, kind: str) -> list[frozenset[str]]:
        """The subjects of each NATS connection of this kind of service (inboxes left out)."""
        url = f"{self.nats.monitor_url}/connz?subs=1&limit=4096"
        with urllib.request.urlopen(url, timeout=5) as r:
            data = json.load(r)
        return [frozenset(s for s in c.get("subscriptions_list") or [] if not s.startswith("_INBOX."))
                for c in data.get("connections") or [] if c.get("name") == CONNECTION_NAMES[kind]]

    def subscribed(self, kind: str) -> int:
        """How many replicas of `kind` NATS sees subscribed to everything that kind listens to."""
        want = self.subjects[kind]
        return sum(1 for subjects in self.connections(kind) if subjects >= want)

    def wait_subscribed(self, kind: str, count: int, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while self.subscribed(kind) != count:
            if self.dead():
                raise AssertionError(f"died: {self.dead()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{count} {kind} replicas never subscribed; NATS sees {self.connections(kind)}")
            time.sleep(0.1)

    def learn_subjects(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Every kind's subjects, once both its replicas have connected, hold the same non-empty set
        and it stays the same for a second (a service subscribes in one go when its broker starts)."""
        deadline = time.monotonic() + timeout
        for kind in KINDS:
            stable_since, last = None, None
            while True:
                conns = self.connections(kind)
                same = len(conns) == REPLICAS and all(conns) and len(set(conns)) == 1
                if same and conns[0] == last:
                    if stable_since is not None and time.monotonic() - stable_since >= 1.0:
                        self.subjects[kind] = conns[0]
                        break
                else:
                    stable_since = time.monotonic() if same else None
                last = conns[0] if same else None
                if self.dead():
                    raise AssertionError(f"died: {self.dead()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"{kind}: replicas never agreed on their subscriptions: {conns}")
                time.sleep(0.1)

    # -- lifecycle of one replica
    def wait_ready(self, replica: Replica, timeout: float = READY_TIMEOUT_S) -> None:
        """Blocking: `replica` (just started) is subscribed beside every other running one of its kind."""
        running = sum(1 for r in self.of(replica.kind) if r.proc.is_running())
        if replica.http_port is not None:
            wait_http_ok(f"{replica.url}/readyz", timeout=timeout, watch=[replica.proc])
        self.wait_subscribed(replica.kind, running, timeout)

    def stop(self, replica: Replica, sig: signal.Signals = signal.SIGTERM, timeout: float = 20.0) -> int | None:
        """Blocking: signal it and wait for its exit (SIGKILL after `timeout`); its exit code, negative
        for a signal (-9 when SIGTERM was not enough)."""
        if sig == signal.SIGKILL:
            return replica.proc.kill()
        return replica.proc.terminate(timeout)

    def start(self, replica: Replica) -> None:
        """Start it again (same command and environment). Call it from the main thread, so the child
        still dies with this process (PR_SET_PDEATHSIG belongs to the forking thread)."""
        replica.proc.start()

    async def restart(self, replica: Replica, sig: signal.Signals = signal.SIGTERM) -> int | None:
        """Stop (signal, wait for the exit), start again and wait until ready; the old exit code."""
        rc = await asyncio.to_thread(self.stop, replica, sig)
        self.start(replica)
        await asyncio.to_thread(self.wait_ready, replica)
        return rc


@pytest.fixture(scope="module")
def cluster(stack: StackUrls, db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    log_dir = tmp_path_factory.mktemp("replica-logs")
    nats = NatsServerProcess(tmp_path_factory.mktemp("replica-nats"), monitor=True)
    nats.start()
    sim_port = find_free_port()
    env = {**service_env(stack, db_url, nats_url=nats.url, sim_port=sim_port), "SPOTTER_METRICS_PORT": "0"}
    sim = ServiceProcess(SIMULATOR, env=env, output=False, log_path=log_dir / "sim.log", label="sim")
    replicas: dict[str, list[Replica]] = {kind: [] for kind in KINDS}
    cluster = Cluster(env=env, nats=nats, sim_url=f"http://127.0.0.1:{sim_port}", sim_proc=sim, replicas=replicas,
                      log_dir=log_dir)
    try:
        sim.start()
        for kind in KINDS:
            for index in range(1, REPLICAS + 1):
                own = dict(env)
                port = None
                if kind == "gateway":
                    port = find_free_port()
                    own["SPOTTER_HTTP_PORT"] = str(port)
                log_path = log_dir / f"{kind}-{index}.log"
                proc = ServiceProcess(f"spotter-{kind}", env=own, output=False, log_path=log_path, label=f"{kind}-{index}")
                replicas[kind].append(Replica(kind=kind, index=index, proc=proc, log_path=log_path, http_port=port))
                proc.start()
        wait_http_ok(f"{cluster.sim_url}/_sim/health", timeout=READY_TIMEOUT_S, watch=cluster.all_procs())
        for gateway in cluster.gateways:
            wait_http_ok(f"{gateway.url}/readyz", timeout=READY_TIMEOUT_S, watch=cluster.all_procs())
        cluster.learn_subjects()
        asyncio.run(_wait_for_responders(nats.url, timeout=READY_TIMEOUT_S))
        print(f"\nreplica logs: {log_dir}")
        yield cluster
    finally:
        stop_services(cluster.all_procs(), timeout=20)
        nats.stop()


@pytest.fixture
async def sim(cluster: Cluster) -> AsyncIterator[Sim]:
    async with httpx.AsyncClient(base_url=cluster.sim_url, timeout=10) as client:
        s = Sim(client)
        await s.latency(ttft_ms=0, tokens_per_second=0)
        try:
            yield s
        finally:
            await s.latency(ttft_ms=0, tokens_per_second=0)


@pytest.fixture
async def healthy(cluster: Cluster) -> AsyncIterator[Cluster]:
    """The cluster with every replica running before the test, and again after it (a test that
    killed or stopped one and failed before starting it again leaves it started)."""
    assert not cluster.dead(), cluster.dead()
    try:
        yield cluster
    finally:
        for kind in KINDS:
            for replica in cluster.of(kind):
                if not replica.proc.is_running():
                    cluster.start(replica)
                    await asyncio.to_thread(cluster.wait_ready, replica)
