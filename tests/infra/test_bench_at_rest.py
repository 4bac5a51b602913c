"""make bench's figure for the platform at rest (bench_stats.cpu_at_rest): a process that works is counted
as working and one that sleeps as sleeping, and the report sums Spotter's processes and servers only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_report import at_rest_section  # noqa: E402
from bench_stats import cpu_at_rest  # noqa: E402


async def test_a_busy_process_spends_its_second_and_a_sleeping_one_nothing() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        spent = await cpu_at_rest({"busy": busy.pid, "idle": idle.pid, "gone": None}, 1.0)
    finally:
        for child in (busy, idle):
            child.kill()
            child.wait()
    assert set(spent) == {"busy", "idle"}
    assert spent["busy"] > 500  # a core's second is 1000 ms; the machine may share it
    assert spent["idle"] < 50


def test_the_report_sums_the_platform_and_leaves_the_simulator_out() -> None:
    lines = at_rest_section({"seconds": 15, "ms_per_s": {"gateway": 0.3, "orchestrator": 1.7, "nats": 4.7, "sim": 2.3}})
    assert "| **Spotter's processes and servers** | **6.7** |" in lines
    assert not any(line.startswith("| sim ") for line in lines)
    assert any("±0.7 ms/s" in line for line in lines)
