"""The tool-runner's settings, read once at start-up and passed in."""

from __future__ import annotations

from spotter_shared.settings import CommonSettings


class ToolRunnerSettings(CommonSettings):
    # Executions run concurrently so one slow tool does not hold up the others.
    tool_runner_max_workers: int = 16
    # A read tool waits this long for rag's hybrid search before it answers by name alone.
    tool_runner_search_timeout_s: float = 1.5
    # How long a call's reply waits for JetStream to store its change announcement (rag's sweep catches up a lost one).
    tool_runner_announce_timeout_s: float = 2.0
    # Tool packs (seed 002): an external API's deadline per attempt, and how old a loaded snapshot may get
    # before it is read again should the change notification be missed.
    tool_runner_pack_timeout_s: float = 10.0
    tool_runner_pack_reload_s: float = 30.0
