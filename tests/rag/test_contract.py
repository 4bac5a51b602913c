"""Rag's subjects over real NATS: ambient and hybrid search, embeddings and re-index (requests,
typed error replies for bad input, the consumer keeps serving), and the durable ENTITIES_CHANGED
consumer (indexes what it is told, dead-letters what it cannot read, acknowledges both).

The subjects and their queue groups are fixed by the contract, so any other rag replica on a
shared server could answer these requests from another database. The service under test therefore
gets a NATS server of its own (the project's devstack binary); Postgres and Redis stay shared."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import nats
import pytest
from faststream import TestApp
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from spotter_cli.devstack import NatsServerProcess, StackUrls
from spotter_cli.reindex import reindex as cli_reindex
from spotter_rag.embeddings import E5_DIMENSIONS, E5_MODEL
from spotter_rag.main import RagSettings, create_app
from spotter_shared.bus import DLQ_STREAM, publish_headers, request
from spotter_shared.contracts.base import ERROR_HEADER, DeadLetter, ErrorReply, dead_letter_subject
from spotter_shared.contracts.rag import (
    AMBIENT_SEARCH, EMBED, ENTITIES_CHANGED, HYBRID_SEARCH, RAG_INDEXER_DURABLE, RAG_STREAM, REINDEX, AmbientQuery,
    AmbientResult, EmbedRequest, EntitiesChanged, ReindexRequest, SearchQuery,
)
from spotter_shared.errors import RemoteError
from tests.factories import Studio, make_studio
from tests.rag.conftest import library_size

QUESTION = "can you find saar and tell me about their payment plan"
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
async def studio(pool: asyncpg.Pool) -> Studio:
    return await make_studio(pool, extra_members=[{"full_name": "Saar Cohen"}, {"full_name": "Saar Levi"}])


@pytest.fixture(scope="module")
async def rag_url(private_nats: str, stack: StackUrls, db_url: str) -> AsyncIterator[str]:
    # No periodic sweep: the tests below index through the subjects, and the shared database is
    # other modules' too.
    settings = RagSettings(nats_url=private_nats, database_url=db_url, redis_url=stack.redis_url, spotter_db_pool_max=3,
                           rag_sweep_interval_s=0)
    async with TestApp(create_app(settings)):
        yield private_nats


@pytest.fixture(scope="module")
async def client(rag_url: str) -> AsyncIterator[NatsBroker]:
    broker = NatsBroker(rag_url)
    await broker.connect()
    yield broker
    await broker.stop()


@pytest.fixture(scope="module")
async def raw(rag_url: str) -> AsyncIterator[Client]:
    nc = await nats.connect(rag_url)
    yield nc
    await nc.close()


@pytest.fixture(scope="module")
async def indexed(client: NatsBroker, studio: Studio, pool: asyncpg.Pool) -> None:
    result = await request(client, REINDEX, ReindexRequest(organization_id=studio.org.id), timeout=TIMEOUT_S)
    assert result.indexed + result.unchanged == 8 + await library_size(pool)


async def ask(broker: NatsBroker, studio: Studio, text: str) -> AmbientResult:
    result = await request(broker, AMBIENT_SEARCH, AmbientQuery(organization_id=studio.org.id, query=text), timeout=5)
    assert isinstance(result, AmbientResult)
    return result


async def error_code(raw: Client, subject: str, payload: bytes) -> str | None:
    msg = await raw.request(subject, payload, timeout=5)
    code = (msg.headers or {}).get(ERROR_HEADER)
    if code:
        error = ErrorReply.model_validate_json(msg.data)
        assert error.code == code and error.message
    return code


# --- ambient --------------------------------------------------------------------------------------


async def test_valid_request_gets_ambient_result(client, studio, indexed) -> None:
    result = await ask(client, studio, QUESTION)
    assert sorted(h.label for h in result.hits if h.scope == "member")[:2] == ["Saar Cohen", "Saar Levi"]
    assert (await ask(client, studio, "hi saar")).skipped == "too_short"


async def test_reply_is_the_contracts_json(raw, studio, indexed) -> None:
    msg = await raw.request(AMBIENT_SEARCH.subject, json.dumps({"organizationId": studio.org.id, "query": QUESTION}).encode(), timeout=5)
    assert ERROR_HEADER not in (msg.headers or {})
    body = json.loads(msg.data)
    assert set(body) == {"hits", "skipped"} and body["hits"]
    assert set(body["hits"][0]) == {"scope", "id", "label", "detail", "score"}


@pytest.mark.parametrize(
    "payload",
    [
        b"not json at all",
        b"",
        b"[1, 2, 3]",
        json.dumps({"organizationId": 42, "query": ["saar"]}).encode(),
        json.dumps({"query": QUESTION}).encode(),
        json.dumps({"organizationId": "00000000-0000-0000-0000-000000000000"}).encode(),
        json.dumps({"organizationId": "not-a-uuid", "query": QUESTION}).encode(),
        json.dumps({"organizationId": "00000000-0000-0000-0000-000000000000", "query": "x" * 16001}).encode(),
    ],
    ids=["not-json", "empty", "array", "wrong-types", "missing-org", "missing-query", "org-not-uuid", "query-too-long"],
)
async def test_malformed_ambient_request_gets_invalid_request(raw, client, studio, indexed, payload: bytes) -> None:
    assert await error_code(raw, AMBIENT_SEARCH.subject, payload) == "invalid_request"
    # ... and the consumer keeps serving.
    assert len((await ask(client, studio, QUESTION)).hits) >= 2


@pytest.mark.parametrize(
    ("content_type", "payload"),
    [("application/json", b"not json"), ("text/plain", b"\xff\xfe")],
    ids=["json-header-bad-json", "text-header-bad-utf8"],
)
async def test_undecodable_body_gets_invalid_request(raw, content_type: str, payload: bytes) -> None:
    msg = await raw.request(AMBIENT_SEARCH.subject, payload, timeout=5, headers={"content-type": content_type})
    assert (msg.headers or {}).get(ERROR_HEADER) == "invalid_request"


async def test_typed_client_raises_remote_error(client) -> None:
    with pytest.raises(RemoteError) as err:
        await request(client, AMBIENT_SEARCH, AmbientQuery(organization_id="demo-gym", query=QUESTION), timeout=5)
    assert err.value.code == "invalid_request"


# --- hybrid search --------------------------------------------------------------------------------


async def test_hybrid_search_answers_per_scope(client, studio, indexed) -> None:
    result = await request(client, HYBRID_SEARCH, SearchQuery(organization_id=studio.org.id, query="saar cohen",
                                                              scopes=["member"], limit=2), timeout=5)
    assert [h.label for h in result.hits] == ["Saar Cohen", "Saar Levi"]
    assert result.hits[0].id == studio.people["Saar Cohen"].membership_id


@pytest.mark.parametrize(
    "payload",
    [
        {"query": "squat"},
        {"organizationId": "not-a-uuid", "query": "squat"},
        {"organizationId": str(uuid.uuid4()), "query": "   "},
        {"organizationId": str(uuid.uuid4()), "query": "x" * 501},
        {"organizationId": str(uuid.uuid4()), "query": "squat", "scopes": []},
        {"organizationId": str(uuid.uuid4()), "query": "squat", "scopes": ["class"]},
        {"organizationId": str(uuid.uuid4()), "query": "squat", "limit": 0},
        {"organizationId": str(uuid.uuid4()), "query": "squat", "limit": 101},
    ],
    ids=["missing-org", "org-not-uuid", "blank-query", "query-too-long", "no-scopes", "unknown-scope", "limit-0", "limit-101"],
)
async def test_malformed_search_gets_invalid_request(raw, client, studio, indexed, payload: dict) -> None:
    assert await error_code(raw, HYBRID_SEARCH.subject, json.dumps(payload).encode()) == "invalid_request"
    ok = await request(client, HYBRID_SEARCH, SearchQuery(organization_id=studio.org.id, query="saar"), timeout=5)
    assert ok.hits


# --- embeddings -----------------------------------------------------------------------------------


async def test_embed_answers_normalised_vectors_of_the_model(client) -> None:
    result = await request(client, EMBED, EmbedRequest(texts=["סקוואט", "приседания", "back squat"], kind="passage"), timeout=10)
    assert (result.model, result.dimensions, len(result.vectors)) == (E5_MODEL, E5_DIMENSIONS, 3)
    assert all(len(v) == E5_DIMENSIONS and abs(sum(x * x for x in v) - 1) < 1e-3 for v in result.vectors)
    again = await request(client, EMBED, EmbedRequest(texts=["back squat"], kind="passage"), timeout=10)
    assert again.vectors[0] == pytest.approx(result.vectors[2], abs=1e-6)


@pytest.mark.parametrize(
    "payload",
    [{"texts": [], "kind": "query"}, {"texts": ["x"] * 65, "kind": "query"}, {"texts": ["x"], "kind": "document"},
     {"texts": ["x" * 8001], "kind": "query"}, {"texts": "squat", "kind": "query"}],
    ids=["no-texts", "too-many", "bad-kind", "text-too-long", "not-a-list"],
)
async def test_malformed_embed_gets_invalid_request(raw, payload: dict) -> None:
    assert await error_code(raw, EMBED.subject, json.dumps(payload).encode()) == "invalid_request"


# --- re-index -------------------------------------------------------------------------------------


async def test_reindex_answers_counts_and_refuses_a_bad_org(client, raw, pool, studio, indexed) -> None:
    result = await request(client, REINDEX, ReindexRequest(organization_id=studio.org.id), timeout=TIMEOUT_S)
    assert (result.indexed, result.unchanged, result.removed, result.model) == (0, 8 + await library_size(pool), 0, E5_MODEL)
    assert await error_code(raw, REINDEX.subject, json.dumps({"organizationId": "demo-gym"}).encode()) == "invalid_request"


async def test_the_cli_prints_the_counts(rag_url, pool, studio, indexed, capsys) -> None:
    assert await cli_reindex(rag_url, studio.org.id, TIMEOUT_S) == 0
    unchanged = 8 + await library_size(pool)
    assert f"reindexed organization {studio.org.id}: 0 indexed, {unchanged} unchanged, 0 removed" in capsys.readouterr().out


async def test_the_cli_explains_what_went_wrong(private_nats, tmp_path, capsys) -> None:
    assert await cli_reindex("nats://127.0.0.1:1", None, 1) == 1
    assert "cannot reach NATS at nats://127.0.0.1:1" in capsys.readouterr().err
    # A NATS server with nobody on spotter.rag.reindex.
    lonely = NatsServerProcess(tmp_path, monitor=False)
    lonely.start()
    try:
        assert await cli_reindex(lonely.url, None, 5) == 1
    finally:
        lonely.stop()
    assert "no rag service is answering" in capsys.readouterr().err


def test_the_cli_refuses_a_bad_org_id_before_asking(capsys) -> None:
    from spotter_cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["reindex", "--org", "demo-gym"])
    assert exit_.value.code == 2
    assert "'demo-gym' is not an organization id" in capsys.readouterr().err


# --- ENTITIES_CHANGED -----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def acks(nc: Client) -> AsyncIterator[asyncio.Queue[str]]:
    """Each acknowledgement the indexer sends: it acknowledges only after the work is done."""
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def on_ack(msg: Msg) -> None:
        if msg.data in (b"", b"+ACK"):
            seen.put_nowait(msg.subject)

    sub = await nc.subscribe(f"$JS.ACK.{RAG_STREAM}.{RAG_INDEXER_DURABLE}.>", cb=on_ack)
    await nc.flush()
    try:
        yield seen
    finally:
        await sub.unsubscribe()


async def announce(nc: Client, payload: bytes) -> None:
    js = nc.jetstream()
    await js.publish(ENTITIES_CHANGED.subject, payload, stream=RAG_STREAM, headers=publish_headers(msg_id=str(uuid.uuid4())))


async def test_an_announced_change_is_indexed_and_acknowledged(raw, pool, client, studio, indexed) -> None:
    program = await pool.fetchval(
        "INSERT INTO programs (organization_id, name, description) VALUES ($1, 'Hyrox Prep', 'Sleds and wall balls') RETURNING id::text",
        studio.org.id,
    )
    change = EntitiesChanged(organization_id=studio.org.id, scope="program", ids=[program])
    async with acks(raw) as seen:
        await announce(raw, change.to_bytes())
        await asyncio.wait_for(seen.get(), TIMEOUT_S)
    row = await pool.fetchrow("SELECT label, model FROM rag_documents WHERE entity_id = $1", uuid.UUID(program))
    assert (row["label"], row["model"]) == ("Hyrox Prep", E5_MODEL)
    hits = await request(client, HYBRID_SEARCH, SearchQuery(organization_id=studio.org.id, query="hyrox", scopes=["program"]), timeout=5)
    # The search has no semantic floor: the studio's other programs follow, nearest by meaning.
    assert hits.hits[0].id == program and program not in [h.id for h in hits.hits[1:]]
    info = await raw.jetstream().consumer_info(RAG_STREAM, RAG_INDEXER_DURABLE)
    assert (info.num_pending, info.num_ack_pending) == (0, 0)


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        json.dumps({"organizationId": str(uuid.uuid4()), "scope": "class", "ids": [str(uuid.uuid4())]}).encode(),
        json.dumps({"organizationId": str(uuid.uuid4()), "scope": "program", "ids": []}).encode(),
        json.dumps({"organizationId": str(uuid.uuid4()), "scope": "program", "ids": ["not-a-uuid"]}).encode(),
        json.dumps({"organizationId": "demo-gym", "scope": "program", "ids": [str(uuid.uuid4())]}).encode(),
        json.dumps({"organizationId": None, "scope": "member", "ids": [str(uuid.uuid4())]}).encode(),
    ],
    ids=["not-json", "unknown-scope", "no-ids", "id-not-uuid", "org-not-uuid", "global-member"],
)
async def test_an_unreadable_announcement_is_dead_lettered_and_acknowledged(raw, payload: bytes) -> None:
    js = raw.jetstream()
    parked = await js.subscribe(dead_letter_subject(ENTITIES_CHANGED.subject), stream=DLQ_STREAM, ordered_consumer=True,
                                deliver_policy=DeliverPolicy.NEW)
    try:
        async with acks(raw) as seen:
            await announce(raw, payload)
            letter = DeadLetter.model_validate_json((await parked.next_msg(timeout=TIMEOUT_S)).data)
            await asyncio.wait_for(seen.get(), TIMEOUT_S)
    finally:
        await parked.unsubscribe()
    assert letter.subject == ENTITIES_CHANGED.subject and letter.reason.startswith("invalid_request")
    assert letter.payload == payload.decode("utf-8", errors="replace")
    info = await js.consumer_info(RAG_STREAM, RAG_INDEXER_DURABLE)
    assert (info.num_pending, info.num_ack_pending) == (0, 0)
