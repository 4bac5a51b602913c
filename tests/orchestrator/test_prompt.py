"""Unit tests of the orchestrator's prompt layout and replay guard (no I/O)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from spotter_orchestrator.prompt import (
    CACHE_1H, CACHE_5M, TURN_CONTEXT_KEY, merge_consecutive, repair_replay, system_blocks, tool_params, turn_context,
    validate_replay, with_cached_tail,
)
from spotter_orchestrator.store import OrgContext, StoredMessage
from spotter_orchestrator.turns import history_of, latest_turn_context
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


NOW = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)


def user(n: int, words: str, context: str | None = None) -> StoredMessage:
    page = {"pathname": "/members", TURN_CONTEXT_KEY: context} if context else None
    return StoredMessage(id=f"u{n}", role="user", content=[{"type": "text", "text": words}], turn_id=f"t{n}",
                         stop_reason=None, page_context=page)


def assistant(n: int, text: str) -> StoredMessage:
    return StoredMessage(id=f"a{n}", role="assistant", content=[{"type": "text", "text": text}], turn_id=f"t{n}",
                         stop_reason="end_turn")


def marks(tools: list, system: list, messages: list) -> list:
    return [m for m in [t.get("cache_control") for t in tools] + [b.get("cache_control") for b in system]
            + [b.get("cache_control") for msg in messages for b in msg["content"]] if m]


def test_four_breakpoints_in_prompt_order_never_1h_after_5m() -> None:
    hits = [AmbientHit(scope="member", id="1", label="Saar <script>", score=1.0)]
    context = turn_context(ORG, ACTOR, PageContext(pathname="/members"), hits, NOW)
    stored = [user(1, "hi", context)]
    tools = tool_params([spec("read__a"), spec("read__b")])
    for system, messages in ((system_blocks(ORG), history_of(stored)),
                             (system_blocks(ORG, latest_turn_context(stored)), history_of(stored, "seed"))):
        assert marks(tools, system, with_cached_tail(messages)) == [CACHE_1H, CACHE_1H, CACHE_1H, CACHE_5M]
    # The system prompt is the two cached blocks only: nothing in it changes per turn.
    system = system_blocks(ORG)
    assert len(system) == 2 and "Dana" not in system[0]["text"] + system[1]["text"]


def test_turn_context_goes_after_the_history_in_the_newest_user_turn() -> None:
    hits = [AmbientHit(scope="member", id="1", label="Saar <script>", score=1.0)]
    first = turn_context(ORG, ACTOR.model_copy(update={"locale": "he"}), None, [], NOW)
    second = turn_context(ORG, ACTOR, PageContext(pathname="/members", selection={"id": 7}), hits, NOW)
    history = history_of([user(1, "hello", first), assistant(1, "hi"), user(2, "find Saar", second)])
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    newest = history[-1]["content"]
    assert newest[0]["text"] == second and newest[1] == {"type": "text", "text": "find Saar"}
    assert history[0]["content"][0]["text"] == first and "locale: he" in first  # each turn keeps its own
    # Per-turn data: escaped and marked untrusted; caller and time stated.
    assert '<ambient_context untrusted="true">' in second and "Saar &lt;script&gt;" in second
    assert '<page_context untrusted="true">' in second and "name: Dana" in second
    assert "<now>2026-11-22T11:30+02:00 (Sunday)</now>" in second
    assert second.startswith("<turn_context>") and second.endswith("</turn_context>")


def test_seed_layout_puts_the_newest_context_in_the_system_prompt_before_the_history() -> None:
    stored = [user(1, "hello", "<turn_context>one</turn_context>"), assistant(1, "hi"),
              user(2, "again", "<turn_context>two</turn_context>")]
    system = system_blocks(ORG, latest_turn_context(stored))
    assert system[2] == {"type": "text", "text": "<turn_context>two</turn_context>"}  # uncached, per turn
    assert all(b["type"] == "text" and "turn_context" not in b["text"] for m in history_of(stored, "seed") for b in m["content"])


def test_replaying_history_is_byte_identical_so_each_prompt_extends_the_last() -> None:
    stored = [user(1, "hello", turn_context(ORG, ACTOR, None, [], NOW)), assistant(1, "hi")]
    call_1 = with_cached_tail(history_of(stored[:1]))
    stored.append(user(2, "more", turn_context(ORG, ACTOR, None, [], datetime(2026, 11, 22, 10, 0, tzinfo=UTC))))
    call_2 = with_cached_tail(history_of(stored))

    def plain(messages: list) -> list:
        return [(m["role"], {k: v for k, v in b.items() if k != "cache_control"}) for m in messages for b in m["content"]]

    assert plain(call_2)[: len(plain(call_1))] == plain(call_1)


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


def test_the_tail_marker_moves_without_touching_the_history() -> None:
    marked = {"type": "text", "text": "old tail", "cache_control": CACHE_5M}
    history = [{"role": "user", "content": [{"type": "text", "text": "a"}, marked]},
               {"role": "assistant", "content": [{"type": "text", "text": "b"}]}]
    before = json.dumps(history)
    out = with_cached_tail(history)
    assert out == [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "old tail"}]},
                   {"role": "assistant", "content": [{"type": "text", "text": "b", "cache_control": CACHE_5M}]}]
    assert json.dumps(history) == before  # the stored history is unchanged
    assert out[0]["content"][0] is history[0]["content"][0]  # unmarked blocks are shared, not copied
    assert with_cached_tail([]) == [] and with_cached_tail([{"role": "user", "content": []}]) == [{"role": "user", "content": []}]


def test_a_catalog_gives_the_same_tools_list_every_turn() -> None:
    """One list per catalog object (the request encoder then finds its JSON by identity); another catalog
    with the same tools is built anew, never served from the first."""
    catalog = [spec("read__members_search"), spec("workouts__create")]
    tools = tool_params(catalog)
    assert tool_params(catalog) is tools
    assert [t["name"] for t in tools] == ["read__members_search", "workouts__create"]
    assert [t.get("cache_control") for t in tools] == [None, CACHE_1H]
    other = [spec("read__members_search")]
    assert tool_params(other) is not tools and [t["name"] for t in tool_params(other)] == ["read__members_search"]
