"""Rate limits on the turn-starting endpoints: per user and per organization, in Redis, checked
before any work. The requests here name a conversation that does not exist, so each one the
limits let through gets its 404 from the handler: a 429 instead proves the limit came first."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import httpx
import pytest

from spotter_cli.devstack import StackUrls
from spotter_gateway.main import create_app
from spotter_gateway.settings import GatewaySettings
from tests.e2e.client import auth
from tests.factories import Studio, make_studio
from tests.servers import serve_in_thread


def settings(private_nats: str, stack: StackUrls, db_url: str, user: str, org: str) -> GatewaySettings:
    return GatewaySettings(nats_url=private_nats, database_url=db_url, redis_url=stack.redis_url, spotter_env="test",
                           spotter_db_pool_max=2, spotter_rate_limit_user=user, spotter_rate_limit_org=org)


@pytest.fixture(scope="module")
def gateway_url(private_nats: str, stack: StackUrls, db_url: str) -> Iterator[str]:
    with serve_in_thread(create_app(settings(private_nats, stack, db_url, "3/minute", "5/minute")), "gateway") as url:
        yield url


@pytest.fixture
async def http(gateway_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=10) as client:
        yield client


async def send(http: httpx.AsyncClient, studio: Studio, user_id: str) -> httpx.Response:
    body = {"conversationId": str(uuid.uuid4()), "message": "hello"}
    return await http.post(f"/organizations/{studio.org.id}/agent/messages", json=body, headers=auth(user_id))


async def test_a_user_over_the_limit_is_refused_with_retry_after(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    statuses = [(await send(http, studio, studio.owner.user_id)).status_code for _ in range(3)]
    assert statuses == [404, 404, 404]
    refused = await send(http, studio, studio.owner.user_id)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited" and refused.json()["error"]["traceId"]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    confirm = await http.post(f"/organizations/{studio.org.id}/agent/conversations/{uuid.uuid4()}/confirm/toolu_x",
                              json={"approved": True}, headers=auth(studio.owner.user_id))
    assert confirm.status_code == 429  # confirm, pick and undo count against the same limit
    # Another person of the studio is not held back by the first one's limit.
    assert (await send(http, studio, studio.admin.user_id)).status_code == 404
    # Nothing was started for anyone.
    assert await pool.fetchval(
        "SELECT count(*) FROM ai_turns t JOIN ai_conversations c ON c.id = t.conversation_id WHERE c.organization_id = $1",
        uuid.UUID(studio.org.id)) == 0


async def test_an_invalid_send_is_counted_too_and_the_limit_answers_first(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    url = f"/organizations/{studio.org.id}/agent/messages"
    blank = {"conversationId": str(uuid.uuid4()), "message": "   "}
    statuses = [(await http.post(url, json=blank, headers=auth(studio.owner.user_id))).status_code for _ in range(3)]
    assert statuses == [400, 400, 400]
    assert (await http.post(url, json=blank, headers=auth(studio.owner.user_id))).status_code == 429
    assert (await send(http, studio, studio.owner.user_id)).status_code == 429
    assert (await http.post(url, json=blank, headers=auth(str(uuid.uuid4())))).status_code == 401  # auth still first


async def test_the_organization_limit_counts_everyone_in_it(http: httpx.AsyncClient, pool: asyncpg.Pool) -> None:
    studio, other = await make_studio(pool), await make_studio(pool)
    people = [studio.owner, studio.admin, studio.coach]
    statuses = [(await send(http, studio, person.user_id)).status_code for person in people for _ in range(2)]
    assert statuses == [404] * 5 + [429]  # the studio's sixth request, though nobody made more than two
    refused = await send(http, studio, studio.coach.user_id)
    assert refused.status_code == 429 and "organization" in refused.json()["error"]["message"]
    assert (await send(http, other, other.owner.user_id)).status_code == 404  # another studio is unaffected


async def test_the_window_recovers(private_nats: str, stack: StackUrls, db_url: str, pool: asyncpg.Pool) -> None:
    studio = await make_studio(pool)
    with serve_in_thread(create_app(settings(private_nats, stack, db_url, "2/second", "100/second")), "gateway") as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            assert [(await send(http, studio, studio.owner.user_id)).status_code for _ in range(3)] == [404, 404, 429]
            deadline = asyncio.get_running_loop().time() + 5
            while (response := await send(http, studio, studio.owner.user_id)).status_code == 429:
                assert asyncio.get_running_loop().time() < deadline, "the window did not recover"
                await asyncio.sleep(int(response.headers["retry-after"]) / 2)
            assert response.status_code == 404


@pytest.mark.parametrize("value", ["lots/minute", "", "10 per fortnight"])
def test_a_malformed_limit_stops_the_gateway_at_start_up(value: str) -> None:
    with pytest.raises(ValueError, match="SPOTTER_RATE_LIMIT_USER"):
        create_app(GatewaySettings(spotter_rate_limit_user=value))
