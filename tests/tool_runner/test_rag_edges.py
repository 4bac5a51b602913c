"""The tool-runner's edges to rag over a real NATS server of this module's own: the announcements of changed
programs and workouts on rag's durable stream (after commit, never for a call that failed, and for undo too),
and read tools that ask rag's hybrid search, then read, filter and order its hits in SQL — or, without an
answer, search by name as before.

Rag itself is rewritten elsewhere; here a minimal responder on spotter.rag.search answers with the hits a
test gives it, which is what these tests are about: what the tools make of rag's answer, or of none. Its
queue group and rag's durable stream are fixed by the contract, so the module has its own NATS server
where no other rag could answer or consume (Postgres stays the session's)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg
import nats
import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from spotter_shared.bus import ensure_streams
from spotter_shared.contracts.base import ERROR_HEADER, ErrorReply
from spotter_shared.contracts.rag import (
    ENTITIES_CHANGED,
    HYBRID_SEARCH,
    RAG_QUEUE,
    RAG_STREAM,
    AmbientHit,
    EntitiesChanged,
    SearchQuery,
    SearchResult,
)
from spotter_shared.contracts.tools import UndoRequest
from spotter_tool_runner.main import ToolRunnerSettings, create_app
from spotter_tool_runner.peers import Rag
from spotter_tool_runner.runner import ToolRunner, undo_key
from spotter_tool_runner.tools import REGISTRY

from tests.factories import Studio, make_studio

from .helpers import Conversation, failed, new_conversation, succeeded


# the tool-runner's side ----------------------------------------------------------------------------


@pytest.fixture
async def broker(private_nats: str) -> AsyncIterator[NatsBroker]:
    """The tool-runner's broker as create_app assembles it (its edges included), started, with the streams its
    lifespan would ensure."""
    broker = create_app(ToolRunnerSettings(nats_url=private_nats)).broker
    async with broker:
        await broker.start()
        await ensure_streams(broker)
        yield broker


def rag_runner(pool: asyncpg.Pool, *, search_timeout_s: float = 5.0) -> ToolRunner:
    return ToolRunner(pool, REGISTRY, rag=Rag(search_timeout_s=search_timeout_s, announce_timeout_s=5.0))


@pytest.fixture
def runner(pool: asyncpg.Pool, broker: NatsBroker) -> ToolRunner:
    return rag_runner(pool)


@pytest.fixture
async def studio(pool: asyncpg.Pool) -> Studio:
    return await make_studio(pool, extra_members=[{"full_name": "Saar Cohen"}])


@pytest.fixture
async def conv(pool: asyncpg.Pool, studio: Studio) -> Conversation:
    return await new_conversation(pool, studio, studio.admin)


async def call(runner: ToolRunner, conv: Conversation, router: str, action: str, input: dict | None = None) -> Any:
    return succeeded(await runner.execute(conv.command(router, action, input)))


# rag's durable stream, as its indexer reads it -------------------------------------------------------


@dataclass
class Announced:
    changed: EntitiesChanged
    msg_id: str | None
    # Whether the rows it names were committed when it arrived.
    committed: bool


@pytest.fixture
async def nc(private_nats: str) -> AsyncIterator[Client]:
    client = await nats.connect(private_nats)
    yield client
    await client.close()


class Indexer:
    """Rag's indexer's view of the stream: every announcement, acked as read. Those of other organizations
    (earlier tests) are read and dropped."""

    def __init__(self, js: JetStreamContext, pool: asyncpg.Pool) -> None:
        self._js = js
        self._pool = pool
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self._js.pull_subscribe(ENTITIES_CHANGED.subject, durable="test-indexer", stream=RAG_STREAM)

    async def until(self, organization_id: str, done: Callable[[list[Announced]], bool]) -> list[Announced]:
        """This organization's announcements, in order, read until `done` says they are all there."""
        got: list[Announced] = []
        while not done(got):
            for msg in await self._sub.fetch(batch=10, timeout=10):
                await msg.ack()
                changed = EntitiesChanged.model_validate_json(msg.data)
                if changed.organization_id == organization_id:
                    msg_id = (msg.headers or {}).get("Nats-Msg-Id")
                    got.append(Announced(changed, msg_id, await self._committed(changed)))
        return got

    async def _committed(self, changed: EntitiesChanged) -> bool:
        table = {"program": "programs", "workout": "workouts"}[changed.scope]
        found = await self._pool.fetchval(f"SELECT count(*) FROM {table} WHERE id = ANY($1::uuid[])", changed.ids)
        return found == len(changed.ids)


@pytest.fixture
async def indexer(nc: Client, pool: asyncpg.Pool, broker: NatsBroker) -> AsyncIterator[Indexer]:
    indexer = Indexer(nc.jetstream(), pool)
    await indexer.start()
    yield indexer


def names(announced: list[Announced]) -> list[tuple[str, list[str]]]:
    return [(a.changed.scope, a.changed.ids) for a in announced]


def having(scope: str, entity_id: str) -> Callable[[list[Announced]], bool]:
    return lambda got: any(a.changed.scope == scope and entity_id in a.changed.ids for a in got)


# announcements --------------------------------------------------------------------------------------


async def test_each_write_of_a_program_or_workout_is_announced_once_committed(runner, indexer, conv, studio) -> None:
    create = conv.command("programs", "create", {"name": f"Engine {uuid.uuid4().hex[:6]}", "kind": "feed"})
    program = succeeded(await runner.execute(create))["id"]
    fran = {"title": "Fran", "description": "21-15-9", "programId": program}
    workout = await call(runner, conv, "workouts", "create", fran)
    await call(runner, conv, "workouts", "update", {"id": workout["id"], "title": "Fran (scaled)"})
    await call(runner, conv, "workouts", "set_sections", {"id": workout["id"], "sections": [{"name": "Metcon"}]})
    await call(runner, conv, "programs", "update", {"id": program, "isActive": False})
    await call(runner, conv, "workouts", "delete", {"id": workout["id"]})

    got = await indexer.until(studio.org.id, lambda got: len(got) == 6)
    w = workout["id"]
    assert names(got) == [("program", [program]), ("workout", [w]), ("workout", [w]), ("workout", [w]),
                          ("program", [program]), ("workout", [w])]
    assert all(a.committed for a in got)
    # Deduplicated by the call: one id per call and scope.
    assert got[0].msg_id == f"{conv.id}:{create.tool_use_id}:program:0"
    assert len({a.msg_id for a in got}) == 6


async def test_applying_a_template_announces_its_new_program_and_every_workout(runner, indexer, conv, studio) -> None:
    days = [{"dayOffset": d, "title": f"Day {d}", "description": "5k row"} for d in (0, 2, 4)]
    base = {"name": f"Base {uuid.uuid4().hex[:6]}", "workouts": days}
    template = await call(runner, conv, "program_templates", "create", base)
    applied = await call(
        runner, conv, "program_templates", "apply",
        {"id": template["id"], "startDate": "2026-06-01", "programName": f"Base block {uuid.uuid4().hex[:6]}"},
    )

    got = await indexer.until(studio.org.id, lambda got: len(got) == 2)
    assert names(got) == [("program", [applied["programId"]]), ("workout", sorted(applied["workoutIds"]))]
    assert len(applied["workoutIds"]) == 3 and all(a.committed for a in got)


async def test_undo_announces_what_the_inverse_changed(pool, runner, indexer, conv, studio) -> None:
    create = conv.command("workouts", "create", {"title": "Grace", "description": "30 clean and jerks"})
    workout = succeeded(await runner.execute(create))["id"]
    undo = UndoRequest(conversation_id=conv.id, tool_use_id=create.tool_use_id, actor=conv.actor, trace_id="t")
    undone = await runner.undo(undo)
    assert succeeded(undone.outcome)["deleted"] is True

    got = await indexer.until(studio.org.id, lambda got: len(got) == 2)
    assert names(got) == [("workout", [workout]), ("workout", [workout])]
    assert got[1].msg_id == f"{conv.id}:{undo_key(create.tool_use_id)}:workout:0"
    assert await pool.fetchval("SELECT deleted_at IS NOT NULL FROM workouts WHERE id = $1", workout)


async def test_failed_rolled_back_replayed_and_other_calls_announce_nothing(
    pool, runner, indexer, conv, studio
) -> None:
    # The workout row is written, then the unknown exercise fails the call: the row is rolled back, unannounced.
    unknown_exercise = {"name": "Run", "exerciseId": str(uuid.uuid4())}
    rolled_back = {"title": "Rolled back", "sections": [{"name": "A", "movements": [unknown_exercise]}]}
    failed(await runner.execute(conv.command("workouts", "create", rolled_back)), "not_found")
    failed(await runner.execute(conv.command("programs", "create", {"name": "CrossFit"})), "conflict")
    await call(runner, conv, "tasks", "create", {"title": "Call Saar"})
    await call(runner, conv, "read", "programs_list")
    held = conv.command("workouts", "delete", {"id": str(uuid.uuid4())}, hold=True)
    assert (await runner.execute(held)).status == "pending"
    first = conv.command("programs", "create", {"name": f"Once {uuid.uuid4().hex[:6]}"})
    program = succeeded(await runner.execute(first))["id"]
    assert (await runner.execute(first)).replayed
    marker = await call(runner, conv, "programs", "create", {"name": f"Marker {uuid.uuid4().hex[:6]}"})

    # Announcements keep the calls' order: all there is before the marker's is the one program.
    got = await indexer.until(studio.org.id, having("program", marker["id"]))
    assert names(got) == [("program", [program]), ("program", [marker["id"]])]
    assert not await pool.fetchval(
        "SELECT count(*) FROM workouts WHERE organization_id = $1 AND title = 'Rolled back'", studio.org.id
    )


async def test_a_call_whose_announcement_fails_still_succeeds(pool, runner, nc, broker, conv) -> None:
    js = nc.jetstream()
    await js.delete_stream(RAG_STREAM)  # JetStream refuses the announcement: no stream takes it
    try:
        program = await call(runner, conv, "programs", "create", {"name": f"Unannounced {uuid.uuid4().hex[:6]}"})
    finally:
        await ensure_streams(broker)
    assert await pool.fetchval("SELECT name FROM programs WHERE id = $1", program["id"]) == program["name"]


# hybrid search ---------------------------------------------------------------------------------------


@dataclass
class SearchResponder:
    """Answers spotter.rag.search in rag's queue group: with `hits`, a typed refusal, or not at all."""

    nc: Client
    hits: list[AmbientHit] = field(default_factory=list)
    mode: Literal["answer", "refuse", "silent"] = "answer"
    asked: list[SearchQuery] = field(default_factory=list)

    async def answer(self, msg: Msg) -> None:
        self.asked.append(SearchQuery.model_validate_json(msg.data))
        if self.mode == "answer":
            await self.nc.publish(msg.reply, SearchResult(hits=self.hits).to_bytes())
        elif self.mode == "refuse":
            error = ErrorReply(code="internal", message="index unavailable")
            await self.nc.publish(msg.reply, error.to_bytes(), headers={ERROR_HEADER: error.code})


@pytest.fixture
async def rag(nc: Client, broker: NatsBroker) -> AsyncIterator[SearchResponder]:
    responder = SearchResponder(nc)
    sub = await nc.subscribe(HYBRID_SEARCH.subject, queue=RAG_QUEUE, cb=responder.answer)
    await nc.flush()
    yield responder
    await sub.unsubscribe()


def hit(scope: str, entity_id: str, score: float) -> AmbientHit:
    return AmbientHit(scope=scope, id=str(entity_id), label="as rag indexed it", score=score)


@pytest.fixture
async def global_ids(pool: asyncpg.Pool) -> dict[str, str]:
    rows = await pool.fetch("SELECT name, id::text FROM exercises WHERE organization_id IS NULL AND deleted_at IS NULL")
    return {r["name"]: r["id"] for r in rows}


async def add_exercise(
    pool: asyncpg.Pool, org_id: str | None, name: str, *, deleted: bool = False, **columns: Any
) -> str:
    return str(await pool.fetchval(
        """INSERT INTO exercises (organization_id, name, modality, equipment, deleted_at)
           VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN now() END) RETURNING id""",
        org_id, name, columns.get("modality", "weightlifting"), columns.get("equipment", ["barbell"]), deleted,
    ))


def squats(ex: dict) -> tuple[str, str, float]:
    return ex["name"], ex["scope"], ex["score"]


async def test_exercises_search_reads_rags_hits_in_its_order(pool, runner, rag, conv, studio, global_ids) -> None:
    own_back_squat = await add_exercise(pool, studio.org.id, "back squat")  # shadows the global Back Squat
    other = await make_studio(pool)
    theirs = await add_exercise(pool, other.org.id, "Their Squat")
    gone = await add_exercise(pool, studio.org.id, f"Gone Squat {uuid.uuid4().hex[:6]}", deleted=True)
    rag.hits = [
        hit("exercise", global_ids["Front Squat"], 0.032),
        hit("exercise", global_ids["Back Squat"], 0.030),  # the studio's own takes its place
        hit("exercise", theirs, 0.029),  # another studio's: never
        hit("exercise", gone, 0.028),  # deleted since rag indexed it
        hit("exercise", uuid.uuid4(), 0.027),  # no such row any more
        AmbientHit(scope="exercise", id="not-a-uuid", label="?", score=0.026),
        hit("member", studio.admin.membership_id, 0.025),  # not asked for
        hit("exercise", global_ids["Air Squat"], 0.016),
        hit("exercise", own_back_squat, 0.015),  # the same exercise again: once, at its better place
    ]

    out = await call(runner, conv, "read", "exercises_search", {"query": "приседания"})
    assert [squats(e) for e in out["exercises"]] == [
        ("Front Squat", "global", 1.0), ("back squat", "studio", 0.94), ("Air Squat", "global", 0.5),
    ]
    assert out["exercises"][1]["id"] == own_back_squat
    assert (out["total"], out["matchedBy"]) == (3, "name_and_meaning")
    asked = SearchQuery(organization_id=studio.org.id, query="приседания", scopes=["exercise"], limit=50)
    assert rag.asked == [asked]

    # Filters apply to rag's hits (which it is asked more of); the limit cuts, the total counts them all.
    barbell = await call(runner, conv, "read", "exercises_search", {"query": "squat", "equipment": "Barbell"})
    assert [e["name"] for e in barbell["exercises"]] == ["Front Squat", "back squat"]
    assert rag.asked[-1].limit == 100
    gymnastics = await call(runner, conv, "read", "exercises_search", {"query": "squat", "modality": "gymnastics"})
    assert [squats(e) for e in gymnastics["exercises"]] == [("Air Squat", "global", 0.5)]
    one = await call(runner, conv, "read", "exercises_search", {"query": "squat", "limit": 1})
    assert ([e["name"] for e in one["exercises"]], one["total"]) == (["Front Squat"], 3)

    # Of equal scores, the studio's own comes first.
    rag.hits = [hit("exercise", global_ids["Air Squat"], 0.02), hit("exercise", own_back_squat, 0.02)]
    tie = await call(runner, conv, "read", "exercises_search", {"query": "squat"})
    assert [squats(e) for e in tie["exercises"]] == [("back squat", "studio", 1.0), ("Air Squat", "global", 1.0)]


async def test_listing_every_exercise_does_not_ask_rag(runner, rag, conv) -> None:
    out = await call(runner, conv, "read", "exercises_search", {"query": "*", "modality": "strongman"})
    assert out["matchedBy"] == "listing" and {e["modality"] for e in out["exercises"]} == {"strongman"}
    assert rag.asked == []


@pytest.fixture
async def murph(pool: asyncpg.Pool, studio: Studio) -> str:
    return str(await pool.fetchval(
        """INSERT INTO workouts (organization_id, program_id, title, description, scheduled_for)
           VALUES ($1, $2, 'Murph', '1 mile run, 100 pull-ups, 1 mile run', '2026-05-25') RETURNING id""",
        studio.org.id, studio.programs["CrossFit"],
    ))


async def test_search_anything_reads_rags_hits_grouped_by_kind(
    pool, runner, rag, conv, studio, murph, global_ids
) -> None:
    other = await make_studio(pool)
    saar = studio.people["Saar Cohen"]
    await pool.execute("UPDATE programs SET deleted_at = now() WHERE id = $1", studio.programs["Olympic Lifting"])
    their_murph = await pool.fetchval(
        "INSERT INTO workouts (organization_id, title) VALUES ($1, 'Murph') RETURNING id", other.org.id
    )
    rag.hits = [
        hit("workout", murph, 0.033),
        hit("workout", their_murph, 0.032),
        hit("member", saar.membership_id, 0.030),
        hit("member", other.owner.membership_id, 0.029),
        hit("exercise", global_ids["Run"], 0.022),
        hit("program", studio.programs["Olympic Lifting"], 0.021),  # deleted since
        hit("program", studio.programs["CrossFit"], 0.0165),
    ]

    out = await call(runner, conv, "read", "search_anything", {"query": "ריצה עם אפוד"})
    assert out["hits"] == [
        {"kind": "program", "id": studio.programs["CrossFit"], "label": "CrossFit", "detail": "group", "score": 0.5},
        {"kind": "workout", "id": murph, "label": "Murph", "detail": "2026-05-25, CrossFit", "score": 1.0},
        {"kind": "exercise", "id": global_ids["Run"], "label": "Run", "detail": "monostructural, global",
         "score": 0.67},
        {"kind": "member", "id": saar.membership_id, "label": "Saar Cohen", "detail": f"member, active, {saar.email}",
         "score": 0.91},
    ]
    assert out["totals"] == {"program": 1, "workout": 1, "exercise": 1, "member": 1}
    assert out["matchedBy"] == "name_and_meaning"
    everything = ["program", "workout", "exercise", "member"]
    assert rag.asked == [SearchQuery(organization_id=studio.org.id, query="ריצה עם אפוד", scopes=everything, limit=10)]

    two_kinds = {"query": "murph", "kinds": ["workout", "member"], "limit": 1}
    one = await call(runner, conv, "read", "search_anything", two_kinds)
    assert [h["id"] for h in one["hits"]] == [murph, saar.membership_id]
    assert (rag.asked[-1].scopes, rag.asked[-1].limit) == (["workout", "member"], 2)

    # An email address is looked up, not understood.
    by_email = await call(runner, conv, "read", "search_anything", {"query": saar.email, "kinds": ["member"]})
    assert ([h["id"] for h in by_email["hits"]], by_email["matchedBy"]) == ([saar.membership_id], "name_only")
    assert len(rag.asked) == 2


async def by_name(pool: asyncpg.Pool, conv: Conversation, action: str, input: dict) -> dict:
    """What the tool answers without rag at all."""
    return succeeded(await ToolRunner(pool, REGISTRY).execute(conv.command("read", action, input)))


SEARCHES = [("exercises_search", {"query": "back squat"}), ("search_anything", {"query": "murph"})]


@pytest.mark.parametrize(("action", "input"), SEARCHES)
async def test_without_an_answer_from_rag_the_tools_search_by_name(pool, runner, conv, murph, action, input) -> None:
    # Nobody serves spotter.rag.search on this server.
    out = await call(runner, conv, "read", action, input)
    assert out == await by_name(pool, conv, action, input)
    assert out["matchedBy"] == "name_only"
    found = {e["name"] for e in out.get("exercises", [])} | {h["id"] for h in out.get("hits", [])}
    assert found & {"Back Squat", murph}


@pytest.mark.parametrize(("action", "input"), SEARCHES)
@pytest.mark.parametrize("mode", ["refuse", "silent"])
async def test_a_refusing_or_slow_rag_leaves_the_search_by_name(
    pool, broker, rag, conv, murph, mode, action, input
) -> None:
    rag.mode = mode
    impatient = rag_runner(pool, search_timeout_s=0.3)
    out = succeeded(await impatient.execute(conv.command("read", action, input)))
    assert len(rag.asked) == 1
    assert out == await by_name(pool, conv, action, input)


@pytest.mark.parametrize(("action", "input"), SEARCHES)
async def test_when_none_of_rags_hits_is_there_any_more_the_tools_search_by_name(
    pool, runner, rag, conv, murph, action, input
) -> None:
    other = await make_studio(pool)
    rag.hits = [hit("exercise", await add_exercise(pool, other.org.id, "Their Squat"), 0.03),
                hit("workout", uuid.uuid4(), 0.02)]
    out = await call(runner, conv, "read", action, input)
    assert len(rag.asked) == 1
    assert out == await by_name(pool, conv, action, input)
