"""The whole platform for one benchmark run: ephemeral NATS/Postgres/Redis, migrations and demo
seed, the model simulator with fixed latency, and the five services. Everything stops in close()."""

from __future__ import annotations

import os
import sys
import urllib.request
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from spotter_cli.devstack import DevStack, find_free_port, repo_root
from spotter_cli.supervisor import (
    SERVICES, SIMULATOR, ServiceProcess, run_command, start_services, stop_services, wait_http_ok,
)

DEMO_EMAIL = "owner@demo.gym"
DEMO_ORG_NAME = "Demo Gym"


def say(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


@dataclass
class Platform:
    ttft_ms: int
    tokens_per_second: float
    log_dir: Path
    stack: Optional[DevStack] = None
    procs: dict[str, ServiceProcess] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    gateway_url: str = ""
    sim_url: str = ""
    token: str = ""
    org_id: str = ""

    def start(self) -> "Platform":
        root = repo_root()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for old in self.log_dir.glob("*.log"):
            old.unlink()
        self.stack = DevStack(ephemeral=True)
        urls = self.stack.start()
        http_port, sim_port = find_free_port(), find_free_port()
        self.gateway_url = f"http://127.0.0.1:{http_port}"
        self.sim_url = f"http://127.0.0.1:{sim_port}"
        self.env = {
            **os.environ,
            **urls.as_env(),
            "PYTHONUNBUFFERED": "1",
            "SPOTTER_REPO_ROOT": str(root),
            "SPOTTER_HTTP_PORT": str(http_port),
            "SPOTTER_SIM_PORT": str(sim_port),
            "SPOTTER_SIM_TTFT_MS": str(self.ttft_ms),
            "SPOTTER_SIM_TOKENS_PER_SECOND": str(self.tokens_per_second),
            "ANTHROPIC_BASE_URL": self.sim_url,
            "ANTHROPIC_API_KEY": "sk-ant-simulator",
            # Like the direct baseline (max_retries=0): a provider error shows up, not a hidden retry.
            "SPOTTER_PROVIDER_RETRIES": "0",
            # One demo user drives every benchmark conversation: the rate limits would measure themselves.
            "SPOTTER_RATE_LIMIT_USER": "1000000/minute",
            "SPOTTER_RATE_LIMIT_ORG": "1000000/minute",
        }
        for args in (["migrate"], ["seed-demo"]):
            p = run_command("spotter", args, env=self.env, cwd=root, output=False, timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"`spotter {' '.join(args)}` failed ({p.returncode}):\n{p.output_text()[-2000:]}")
        tok = run_command("spotter", ["token", DEMO_EMAIL], env=self.env, cwd=root, output=False, timeout=60)
        lines = [ln.strip() for ln in tok.output_text().splitlines() if ln.strip()]
        if tok.returncode != 0 or not lines:
            raise RuntimeError(f"`spotter token {DEMO_EMAIL}` failed ({tok.returncode}): {tok.output_text()[-500:]}")
        self.token = lines[-1]

        self.procs = start_services(self.env, [SIMULATOR, *SERVICES], cwd=root, output=False, log_dir=self.log_dir)
        wait_http_ok(f"{self.sim_url}/_sim/health", timeout=60, watch=self.procs.values())
        wait_http_ok(f"{self.gateway_url}/readyz", timeout=90, watch=self.procs.values())
        self.org_id = self._org_id()
        say(f"platform up: gateway {self.gateway_url}, simulator {self.sim_url} "
            f"(ttft {self.ttft_ms} ms, {self.tokens_per_second:g} tokens/s), logs {self.log_dir}")
        return self

    def _org_id(self) -> str:
        req = urllib.request.Request(f"{self.gateway_url}/me", headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            me = json.load(r)
        for m in me.get("memberships", []):
            if m.get("organizationName") == DEMO_ORG_NAME:
                return m["organizationId"]
        raise RuntimeError(f"{DEMO_EMAIL} has no membership in {DEMO_ORG_NAME!r}: {me}")

    def dead(self) -> list[str]:
        out = [f"{name} (exit {p.returncode})" for name, p in self.procs.items() if p.died_unexpectedly()]
        if self.stack is not None:
            out += [f"{k} server" for k, s in self.stack.servers.items() if not s.is_running()]
        return out

    def pids(self) -> dict[str, Optional[int]]:
        roots: dict[str, Optional[int]] = {name.removeprefix("spotter-"): p.pid for name, p in self.procs.items()}
        if self.stack is not None:
            roots.update({k: s.pid for k, s in self.stack.servers.items()})
        return roots

    def output(self, name: str) -> str:
        p = self.procs.get(name)
        return p.output_text() if p else ""

    def close(self) -> None:
        if self.procs:
            codes = stop_services(self.procs)
            say("stopped services: " + ", ".join(f"{k.removeprefix('spotter-')}={v}" for k, v in codes.items()))
            self.procs = {}
        if self.stack is not None:
            self.stack.stop()
            self.stack = None
