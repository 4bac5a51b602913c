"""spotter.rag.ambient over real NATS: valid requests get an AmbientResult, malformed ones a typed
invalid_request error reply, and the consumer keeps serving.

The subject and its queue group are fixed by the contract, so any other rag replica on a shared
server could answer these requests from another database. The service under test therefore gets
a NATS server of its own (the project's devstack binary), Postgres and Redis stay shared."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import nats
import pytest
from faststream import TestApp
from faststream.nats import NatsBroker
from nats.aio.client import Client

from spotter_cli.devstack import StackUrls
from spotter_rag.main import RagSettings, create_app
from spotter_shared.bus import request
from spotter_shared.contracts.base import ERROR_HEADER, ErrorReply
from spotter_shared.contracts.rag import AMBIENT_SEARCH, AmbientQuery, AmbientResult
from spotter_shared.errors import RemoteError
from tests.factories import Studio, make_studio

QUESTION = "can you find saar and tell me about their payment plan"


@pytest.fixture(scope="module")
async def studio(pool: asyncpg.Pool) -> Studio:
    return await make_studio(pool, extra_members=[{"full_name": "Saar Cohen"}, {"full_name": "Saar Levi"}])


@pytest.fixture(scope="module")
async def rag_url(private_nats: str, stack: StackUrls, db_url: str) -> AsyncIterator[str]:
    settings = RagSettings(nats_url=private_nats, database_url=db_url, redis_url=stack.redis_url, spotter_db_pool_max=2)
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


async def ask(broker: NatsBroker, studio: Studio, text: str) -> AmbientResult:
    result = await request(broker, AMBIENT_SEARCH, AmbientQuery(organization_id=studio.org.id, query=text), timeout=5)
    assert isinstance(result, AmbientResult)
    return result


async def test_valid_request_gets_ambient_result(client, studio) -> None:
    result = await ask(client, studio, QUESTION)
    assert sorted(h.label for h in result.hits if h.scope == "member")[:2] == ["Saar Cohen", "Saar Levi"]
    assert (await ask(client, studio, "hi saar")).skipped == "too_short"


async def test_reply_is_the_contracts_json(raw, studio) -> None:
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
async def test_malformed_request_gets_invalid_request(raw, client, studio, payload: bytes) -> None:
    msg = await raw.request(AMBIENT_SEARCH.subject, payload, timeout=5)
    assert (msg.headers or {}).get(ERROR_HEADER) == "invalid_request"
    error = ErrorReply.model_validate_json(msg.data)
    assert error.code == "invalid_request" and error.message
    # ... and the consumer keeps serving.
    assert len((await ask(client, studio, QUESTION)).hits) >= 2


@pytest.mark.parametrize(
    ("content_type", "payload"),
    [("application/json", b"not json"), ("text/plain", b"\xff\xfe")],
    ids=["json-header-bad-json", "text-header-bad-utf8"],
)
async def test_undecodable_body_gets_invalid_request(raw, content_type: str, payload: bytes) -> None:
    msg = await raw.request(AMBIENT_SEARCH.subject, payload, timeout=0.5, headers={"content-type": content_type})
    assert (msg.headers or {}).get(ERROR_HEADER) == "invalid_request"


async def test_typed_client_raises_remote_error(client) -> None:
    bad = AmbientQuery(organization_id="demo-gym", query=QUESTION)
    with pytest.raises(RemoteError) as err:
        await request(client, AMBIENT_SEARCH, bad, timeout=5)
    assert err.value.code == "invalid_request"
