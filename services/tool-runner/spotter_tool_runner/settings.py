"""The tool-runner's settings, read once at start-up and passed in."""

from __future__ import annotations

from spotter_shared.settings import CommonSettings


class ToolRunnerSettings(CommonSettings):
    # Executions run concurrently so one slow tool does not hold up the others.
    tool_runner_max_workers: int = 16
