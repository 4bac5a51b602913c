"""Seed 000 compaction: where a conversation is cut (pure), and what is replayed afterwards
(the store against a real, migrated Postgres)."""

from __future__ import annotations

import json
import uuid

import asyncpg

from spotter_orchestrator.compaction import (
    SUMMARY_OPEN, clean_title, plan_compaction, summary_content, summary_prompt, summary_text, transcript,
)
from spotter_orchestrator.prompt import validate_replay
from spotter_orchestrator.store import ConversationInfo, StoredMessage, Store, fallback_title, primary_language
from spotter_orchestrator.turns import history_of
from spotter_shared.contracts.commands import Actor, SendMessage
from tests.factories import make_studio, new_send

THINKING = {"type": "thinking", "thinking": "I should search.", "signature": "c2lnbmVk"}


def text(role: str, n: int, words: str = "") -> StoredMessage:
    return StoredMessage(id=f"m{n}", role=role, content=[{"type": "text", "text": words or f"{role} {n}"}],
                         turn_id=None, stop_reason=None)


def asks(n: int) -> StoredMessage:
    return StoredMessage(id=f"m{n}", role="assistant", turn_id=None, stop_reason="tool_use", content=[
        THINKING, {"type": "tool_use", "id": f"tu{n}", "name": "read__members_search", "input": {"query": "Saar"}}])


def answers(n: int) -> StoredMessage:
    return StoredMessage(id=f"m{n}", role="tool_result", turn_id=None, stop_reason=None, content=[
        {"type": "tool_result", "tool_use_id": f"tu{n - 1}", "content": json.dumps({"members": [{"name": "Saar Levi"}]})}])


def chat(count: int) -> list[StoredMessage]:
    return [text("user" if i % 2 == 0 else "assistant", i) for i in range(count)]


def test_compacts_from_24_messages_keeping_the_last_6() -> None:
    assert plan_compaction(chat(23)) is None
    plan = plan_compaction(chat(24))
    assert plan is not None
    assert [m.id for m in plan.kept] == [f"m{i}" for i in range(18, 24)]
    assert len(plan.summarized) == 18 and plan.through_id == "m17" and plan.previous_summary == ""


def test_the_cut_never_separates_a_tool_use_from_its_result() -> None:
    # 24 messages whose 7th-from-last is the tool_use and 6th-from-last its result.
    stored = chat(17) + [asks(17), answers(18)] + [text("assistant" if i % 2 else "user", i) for i in range(19, 24)]
    plan = plan_compaction(stored)
    assert plan is not None
    assert plan.kept[0].id == "m17" and plan.kept[0].role == "assistant" and len(plan.kept) == 7
    # The kept tail replays valid, its signed thinking exactly as stored.
    note = StoredMessage(id="n", role="system_note", content=summary_content("earlier"), turn_id=None, stop_reason=None)
    history = history_of([note, *plan.kept])
    assert validate_replay(history) == [] and history[1]["content"][0] == THINKING
    # A result with nothing before it to keep: no cut at all rather than a broken one.
    assert plan_compaction([answers(i) for i in range(24)]) is None


def test_counting_restarts_after_the_latest_summary() -> None:
    note = StoredMessage(id="n", role="system_note", content=summary_content("- the user asked for Saar"),
                         turn_id=None, stop_reason=None)
    assert plan_compaction([note, *chat(23)]) is None
    plan = plan_compaction([note, *chat(24)])
    assert plan is not None and plan.previous_summary == "- the user asked for Saar"
    assert summary_text(note) == "- the user asked for Saar"


def test_the_summary_model_reads_words_calls_and_results_but_not_thinking() -> None:
    lines = transcript([text("user", 0, "find\nSaar"), asks(1), answers(2), text("user", 3, '<app_event kind="undo">x</app_event>')])
    assert lines.splitlines() == [
        "[user] find Saar",
        '[tool_call] read__members_search {"query": "Saar"}',
        '[tool_result] read__members_search {"members": [{"name": "Saar Levi"}]}',
        '[app_event] <app_event kind="undo">x</app_event>',
    ]
    prompt = summary_prompt("he", "earlier <b>", [text("user", 0, "a < b")])
    assert "<locale>he</locale>" in prompt and "earlier &lt;b&gt;" in prompt and "[user] a &lt; b" in prompt


def test_titles_and_locales_are_cleaned() -> None:
    assert clean_title('"Members at risk."\nmore') == "Members at risk"
    assert clean_title("«Расписание на завтра»") == "Расписание на завтра"
    assert clean_title("  \n ") is None and len(clean_title("x" * 300) or "") == 80
    assert fallback_title("  first line\nsecond") == "first line"
    assert [primary_language(t) for t in ("he-IL", "ru", "en-US", "iw", "zh-Hant-TW", "", "not a tag!", None)] == \
        ["he", "ru", "en", "he", "zh", "en", "en", "en"]


async def test_replay_starts_at_the_latest_summary_and_keeps_its_tail(pool: asyncpg.Pool) -> None:
    cmd = await new_send(pool, locale="ru-RU", message="Привет\nвторая строка")
    store = Store(pool)
    await store.begin_turn(cmd, "claude-sonnet-5-5")
    assert await store.conversation(cmd.conversation_id) == ConversationInfo(title="Привет", locale="ru")
    ids = [await store.append_message(cmd.conversation_id, cmd.turn_id, "user" if i % 2 == 0 else "assistant",
                                      [{"type": "text", "text": f"message {i}"}]) for i in range(10)]
    assert [m.id for m in await store.messages(cmd.conversation_id)] == ids  # no summary: everything

    await store.add_summary(cmd.conversation_id, cmd.turn_id, summary_content("first summary"), summary="first summary",
                            through_message_id=ids[3])
    await store.append_message(cmd.conversation_id, cmd.turn_id, "assistant", [{"type": "text", "text": "after"}])
    await store.add_summary(cmd.conversation_id, cmd.turn_id, summary_content("second summary"), summary="second summary",
                            through_message_id=ids[6])
    replay = await store.messages(cmd.conversation_id)
    # The latest note first, then everything after the message it summarized through (not the notes).
    assert replay[0].role == "system_note" and summary_text(replay[0]) == "second summary"
    assert replay[0].page_context == {"summarizedThroughMessageId": ids[6]}
    assert [text_of(m) for m in replay[1:]] == ["message 7", "message 8", "message 9", "after"]
    assert history_of(replay)[0] == {"role": "user", "content": summary_content("second summary")}
    assert history_of(replay)[0]["content"][0]["text"].startswith(SUMMARY_OPEN)
    assert len(await store.all_messages(cmd.conversation_id)) == 13
    # A follow-up's first delivery reads the same replay in begin_turn's statement (and none when not asked).
    follow_up = cmd.model_copy(update={"command_id": str(uuid.uuid4()), "turn_id": str(uuid.uuid4()), "is_new": False})
    assert (await store.begin_turn(follow_up, "claude-sonnet-5-5", replay=True)).replay == tuple(replay)
    again = cmd.model_copy(update={"command_id": str(uuid.uuid4()), "turn_id": str(uuid.uuid4()), "is_new": False})
    assert (await store.begin_turn(again, "claude-sonnet-5-5")).replay is None

    # The summary is the conversation's searchable text; its embedding is stored for that summary only.
    assert await store.set_summary_embedding(cmd.conversation_id, "second summary", [0.6, 0.8, 0.0], "test-model")
    assert not await store.set_summary_embedding(cmd.conversation_id, "first summary", [1.0, 0.0, 0.0], "test-model")
    row = await pool.fetchrow("SELECT summary, summary_embedding::text AS e, summary_embedding_model AS m "
                              "FROM ai_conversations WHERE id = $1", uuid.UUID(cmd.conversation_id))
    assert dict(row) == {"summary": "second summary", "e": "[0.6,0.8,0]", "m": "test-model"}

    # A title replaces the first line only while the first line is still the title.
    assert await store.set_title(cmd.conversation_id, "Приветствие", replacing="Привет")
    assert not await store.set_title(cmd.conversation_id, "Другое", replacing="Привет")
    assert (await store.conversation(cmd.conversation_id)).title == "Приветствие"


async def test_a_note_whose_anchor_names_no_message_of_the_conversation_anchors_at_itself(pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    owner = studio.owner
    actor = Actor(user_id=owner.user_id, organization_id=studio.org.id, membership_id=owner.membership_id, role="owner")
    store = Store(pool)
    conversations = []
    for _ in range(2):
        cmd = SendMessage(command_id=str(uuid.uuid4()), turn_id=str(uuid.uuid4()), conversation_id=str(uuid.uuid4()),
                          actor=actor, trace_id="t", is_new=True, message="hello")
        await store.begin_turn(cmd, "claude-sonnet-5-5")
        conversations.append(cmd)
    cmd, other = conversations
    other_id = await store.append_message(other.conversation_id, other.turn_id, "user", [{"type": "text", "text": "x"}])
    for i, anchor in enumerate(("not-a-uuid", other_id, str(uuid.uuid4()).upper())):
        await store.append_message(cmd.conversation_id, cmd.turn_id, "user", [{"type": "text", "text": f"before {i}"}])
        await store.add_summary(cmd.conversation_id, cmd.turn_id, summary_content(f"summary {i}"), summary=f"summary {i}",
                                through_message_id=anchor)
        await store.append_message(cmd.conversation_id, cmd.turn_id, "assistant", [{"type": "text", "text": f"after {i}"}])
        replay = await store.messages(cmd.conversation_id)
        assert summary_text(replay[0]) == f"summary {i}"
        assert [text_of(m) for m in replay[1:]] == [f"after {i}"], anchor

    # An anchor in another spelling of the same id (upper case) still names its message.
    ids = [await store.append_message(cmd.conversation_id, cmd.turn_id, "user", [{"type": "text", "text": f"m{i}"}])
           for i in range(3)]
    await store.add_summary(cmd.conversation_id, cmd.turn_id, summary_content("upper"), summary="upper",
                            through_message_id=ids[0].upper())
    assert [text_of(m) for m in (await store.messages(cmd.conversation_id))[1:]] == ["m1", "m2"]


def text_of(message: StoredMessage) -> str:
    return "".join(b["text"] for b in message.content if b.get("type") == "text")

