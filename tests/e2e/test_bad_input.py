"""Bad input gets a 4xx with {"error": {code, message, traceId}} and changes nothing."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
import jwt
import pytest

from spotter_shared.settings import AuthSettings
from tests.factories import make_studio

from .client import auth, send


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    assert uuid.UUID(body["error"]["traceId"])


async def _count(pool: asyncpg.Pool) -> tuple[int, int]:
    return (await pool.fetchval("SELECT count(*) FROM ai_messages"), await pool.fetchval("SELECT count(*) FROM ai_turns"))


@pytest.fixture
async def studio(pool: asyncpg.Pool):
    return await make_studio(pool)


def _url(studio) -> str:
    return f"/organizations/{studio.org.id}/agent/messages"


@pytest.mark.parametrize(
    ("content", "body"),
    [
        ("application/json", b"{not json"),
        ("application/json", b'{"conversationId": null}'),
        ("application/json", b'{"message": ""}'),
        ("application/json", b'{"message": "   "}'),
        ("application/json", b'{"message": 42}'),
        ("application/json", b'{"message": "hi", "conversationId": "nope"}'),
        ("application/json", b'{"message": "hi", "unexpected": true}'),
        ("application/json", b'[]'),
    ],
)
async def test_malformed_send_bodies(http: httpx.AsyncClient, pool: asyncpg.Pool, studio, content: str, body: bytes) -> None:
    before = await _count(pool)
    r = await http.post(_url(studio), content=body, headers={**auth(studio.owner.user_id), "content-type": content})
    assert_error(r, 400, "invalid_request")
    assert await _count(pool) == before


async def test_oversized_message_and_body(http: httpx.AsyncClient, pool: asyncpg.Pool, studio) -> None:
    before = await _count(pool)
    r = await http.post(_url(studio), json={"message": "x" * 16001}, headers=auth(studio.owner.user_id))
    assert_error(r, 400, "invalid_request")
    r = await http.post(_url(studio), content=b"x" * 300_000, headers={**auth(studio.owner.user_id), "content-type": "application/json"})
    assert_error(r, 413, "invalid_request")
    assert await _count(pool) == before


async def test_auth_failures(http: httpx.AsyncClient, studio) -> None:
    body = {"message": "who am I?"}
    assert_error(await http.post(_url(studio), json=body), 401, "unauthorized")
    assert_error(await http.post(_url(studio), json=body, headers={"Authorization": "Bearer not.a.jwt"}), 401, "unauthorized")
    forged = jwt.encode({"sub": studio.owner.user_id, "exp": 9999999999}, "wrong-secret-wrong-secret-wrong-secret!!", algorithm="HS256")
    assert_error(await http.post(_url(studio), json=body, headers={"Authorization": f"Bearer {forged}"}), 401, "unauthorized")
    expired = jwt.encode({"sub": studio.owner.user_id, "exp": 1}, AuthSettings().spotter_jwt_secret, algorithm="HS256")
    assert_error(await http.post(_url(studio), json=body, headers={"Authorization": f"Bearer {expired}"}), 401, "unauthorized")
    unknown = jwt.encode({"sub": str(uuid.uuid4()), "exp": 9999999999}, AuthSettings().spotter_jwt_secret, algorithm="HS256")
    assert_error(await http.get("/me", headers={"Authorization": f"Bearer {unknown}"}), 401, "unauthorized")


async def test_member_role_is_refused_send(http: httpx.AsyncClient, pool: asyncpg.Pool, studio) -> None:
    before = await _count(pool)
    r = await http.post(_url(studio), json={"message": "who am I?"}, headers=auth(studio.member.user_id))
    assert_error(r, 403, "forbidden")
    assert await _count(pool) == before
    # Members may still read their own (empty) list: they are members of the org.
    r = await http.get(f"/organizations/{studio.org.id}/agent/conversations", headers=auth(studio.member.user_id))
    assert r.status_code == 200


async def test_other_org_and_other_users_conversations_are_not_found(http: httpx.AsyncClient, pool: asyncpg.Pool, studio) -> None:
    other = await make_studio(pool)
    mine = await send(http, studio.org.id, studio.owner.user_id, "who am I?")
    cid = mine.conversation_id
    base = f"/organizations/{studio.org.id}/agent"
    # wrong org: not a member there
    assert_error(await http.post(f"/organizations/{other.org.id}/agent/messages", json={"message": "hi"}, headers=auth(studio.owner.user_id)), 404, "not_found")
    assert_error(await http.get(f"/organizations/{uuid.uuid4()}/agent/conversations", headers=auth(studio.owner.user_id)), 404, "not_found")
    # another user's conversation in the same org, for every route that takes it
    for url in (f"{base}/conversations/{cid}", f"{base}/conversations/{cid}/events"):
        assert_error(await http.get(url, headers=auth(studio.admin.user_id)), 404, "not_found")
    before = await _count(pool)
    r = await http.post(f"{base}/messages", json={"conversationId": cid, "message": "hi"}, headers=auth(studio.admin.user_id))
    assert_error(r, 404, "not_found")
    # unknown and malformed conversation ids
    assert_error(await http.get(f"{base}/conversations/{uuid.uuid4()}", headers=auth(studio.owner.user_id)), 404, "not_found")
    assert_error(await http.get(f"{base}/conversations/not-a-uuid", headers=auth(studio.owner.user_id)), 400, "invalid_request")
    r = await http.post(f"{base}/messages", json={"conversationId": str(uuid.uuid4()), "message": "hi"}, headers=auth(studio.owner.user_id))
    assert_error(r, 404, "not_found")
    assert_error(await http.get(f"{base}/conversations/{cid}/events", headers={**auth(studio.owner.user_id), "Last-Event-ID": "abc"}), 400, "invalid_request")
    assert_error(await http.get(f"{base}/conversations/{cid}/events?after=-1", headers=auth(studio.owner.user_id)), 400, "invalid_request")
    assert await _count(pool) == before


async def test_unknown_route_and_method(http: httpx.AsyncClient, studio) -> None:
    assert_error(await http.get("/nope"), 404, "not_found")
    assert_error(await http.get(_url(studio), headers=auth(studio.owner.user_id)), 405, "invalid_request")
