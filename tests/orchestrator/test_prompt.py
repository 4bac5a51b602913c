"""Unit tests of the orchestrator's prompt layout and replay guard (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime

from spotter_orchestrator.prompt import (
    CACHE_1H, CACHE_5M, merge_consecutive, repair_replay, system_blocks, tool_params, validate_replay, with_cached_tail,
)
from spotter_orchestrator.store import OrgContext
from spotter_shared.contracts.commands import Actor, PageContext
from spotter_shared.contracts.rag import AmbientHit
from spotter_shared.contracts.tools import ToolSpec

ORG = OrgContext(id="o", name="Demo <Gym>", tier="pro", locale="en", timezone="Asia/Jerusalem", agent_enabled=True,
                 caller_name="Dana", caller_email="d@x")
ACTOR = Actor(user_id="u", organization_id="o", membership_id="m", role="owner")


def spec(name: str) -> ToolSpec:
    router, action = name.split("__")
    return ToolSpec(name=name, router=router, action=action, summary="s", input_schema={"type": "object"},
                    side_effects="read", confirm="never", kind="normal", has_inverse=False)


def test_four_breakpoints_in_prompt_order_never_1h_after_5m() -> None:
    hits = [AmbientHit(scope="member", id="1", label="Saar <script>", score=1.0)]
    system = system_blocks(ORG, ACTOR, PageContext(pathname="/members"), hits, datetime(2026, 11, 22, tzinfo=UTC))
    tools = tool_params([spec("read__a"), spec("read__b")])
    messages = with_cached_tail([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    marks = [t.get("cache_control") for t in tools] + [b.get("cache_control") for b in system] + \
        [b.get("cache_control") for m in messages for b in m["content"]]
    placed = [m for m in marks if m]
    assert placed == [CACHE_1H, CACHE_1H, CACHE_1H, CACHE_5M]
    # Per-request data sits after the cached prefix, in the uncached page block, escaped and tagged.
    assert "cache_control" not in system[2] and "Saar &lt;script&gt;" in system[2]["text"]
    assert '<ambient_context trust="untrusted">' in system[2]["text"] and "Dana" not in system[0]["text"] + system[1]["text"]


def test_cached_tail_moves_and_never_accumulates() -> None:
    history = [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": CACHE_5M}]},
               {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
               {"role": "user", "content": [{"type": "text", "text": "c"}]}]
    out = with_cached_tail(history)
    assert [b.get("cache_control") for m in out for b in m["content"]] == [None, None, CACHE_5M]
    assert history[0]["content"][0]["cache_control"] == CACHE_5M  # input not mutated


def test_orphaned_tool_use_is_repaired_with_error_results() -> None:
    history = [{"role": "user", "content": [{"type": "text", "text": "q"}]},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read__a", "input": {}},
                                                 {"type": "tool_use", "id": "t2", "name": "read__b", "input": {}}]},
               {"role": "user", "content": [{"type": "text", "text": "never mind"}]}]
    violations = validate_replay(history)
    assert [(v.message_index, v.tool_use_ids) for v in violations] == [(1, ("t1", "t2"))]
    repaired = repair_replay(history, violations)
    assert validate_replay(repaired) == []
    first = repaired[2]["content"]
    assert [b.get("tool_use_id") for b in first[:2]] == ["t1", "t2"] and all(b["is_error"] for b in first[:2])
    assert first[2] == {"type": "text", "text": "never mind"}


def test_merge_puts_tool_results_first() -> None:
    merged = merge_consecutive([
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x__y", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "<app_event>undo</app_event>"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "{}"}]},
    ])
    assert len(merged) == 2 and [b["type"] for b in merged[1]["content"]] == ["tool_result", "text"]
