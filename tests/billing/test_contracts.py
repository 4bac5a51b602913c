"""Contract tests over real NATS for billing's four subjects: a valid request gets its reply
contract; a malformed one gets `spotter-error: invalid_request` with an ErrorReply, and the
consumer keeps serving."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest
from faststream import TestApp
from faststream.nats import NatsBroker

from spotter_billing.main import BillingSettings, create_app
from spotter_shared.bus import request
from spotter_shared.contracts.base import ERROR_HEADER, Endpoint, ErrorReply
from spotter_shared.contracts.billing import (
    BUDGET_CHECK,
    RESERVE,
    SETTLE,
    USAGE,
    BudgetCheck,
    BudgetVerdict,
    ModelUsage,
    ReserveBudget,
    Reservation,
    Settlement,
    SettleUsage,
    UsageQuery,
    UsageSnapshot,
)
from spotter_shared.errors import RemoteError
from tests.factories import Studio, make_studio

TIMEOUT = 5.0


@pytest.fixture(scope="module")
async def broker(stack, db_url: str) -> AsyncIterator[NatsBroker]:
    settings = BillingSettings(nats_url=stack.nats_url, database_url=db_url, redis_url=stack.redis_url)
    app = create_app(settings)
    async with TestApp(app):
        yield app.broker


@pytest.fixture
async def studio(pool: asyncpg.Pool) -> Studio:
    return await make_studio(pool, tier="lite")


def valid_payloads(studio: Studio, conversation_id: str) -> dict[str, object]:
    reservation_id = f"res-{uuid.uuid4()}"
    return {
        BUDGET_CHECK.subject: BudgetCheck(organization_id=studio.org.id),
        RESERVE.subject: ReserveBudget(
            reservation_id=reservation_id, organization_id=studio.org.id, model="claude-sonnet-5-5",
            input_tokens=1_000, max_output_tokens=1_000,
        ),
        SETTLE.subject: SettleUsage(
            reservation_id=reservation_id, organization_id=studio.org.id, user_id=studio.owner.user_id,
            conversation_id=conversation_id, model="claude-sonnet-5-5",
            usage=ModelUsage(input_tokens=100, output_tokens=100), count_message=True,
        ),
        USAGE.subject: UsageQuery(organization_id=studio.org.id),
    }


ENDPOINTS = [BUDGET_CHECK, RESERVE, SETTLE, USAGE]

MALFORMED: dict[str, list[bytes]] = {
    BUDGET_CHECK.subject: [b"\x00not json", b"{}", json.dumps({"organizationId": 42}).encode(), b"[1, 2]"],
    RESERVE.subject: [
        b"{",
        json.dumps({"organizationId": str(uuid.uuid4())}).encode(),
        json.dumps({"reservationId": "r", "organizationId": "o", "model": "m", "inputTokens": "many", "maxOutputTokens": 1}).encode(),
        json.dumps({"reservationId": "r", "organizationId": "o", "model": "m", "inputTokens": -1, "maxOutputTokens": 1}).encode(),
    ],
    SETTLE.subject: [
        b"settle!",
        json.dumps({"reservationId": "r"}).encode(),
        json.dumps({"reservationId": "r", "organizationId": "o", "userId": "u", "conversationId": "c", "model": "m",
                    "usage": {"inputTokens": "lots"}}).encode(),
    ],
    USAGE.subject: [b"", b"null", json.dumps({"organizationId": ["x"]}).encode()],
}


@pytest.mark.parametrize("ep", ENDPOINTS, ids=lambda ep: ep.subject)
async def test_valid_request_gets_its_reply_contract(broker: NatsBroker, studio: Studio, new_conversation: Callable, ep: Endpoint) -> None:
    payloads = valid_payloads(studio, await new_conversation(studio))
    reply = await request(broker, ep, payloads[ep.subject], timeout=TIMEOUT)
    assert isinstance(reply, ep.reply)


async def test_round_trip_values(broker: NatsBroker, studio: Studio, new_conversation: Callable) -> None:
    payloads = valid_payloads(studio, await new_conversation(studio))
    verdict = await request(broker, BUDGET_CHECK, payloads[BUDGET_CHECK.subject], timeout=TIMEOUT)
    assert verdict == BudgetVerdict(ok=True, remaining_usd_micros=1_000_000)
    held = await request(broker, RESERVE, payloads[RESERVE.subject], timeout=TIMEOUT)
    assert held == Reservation(ok=True, amount_usd_micros=14_000)
    settled = await request(broker, SETTLE, payloads[SETTLE.subject], timeout=TIMEOUT)
    assert settled == Settlement(cost_usd_micros=1_200)
    snapshot = await request(broker, USAGE, payloads[USAGE.subject], timeout=TIMEOUT)
    assert isinstance(snapshot, UsageSnapshot)
    assert (snapshot.spent_usd_micros, snapshot.remaining_usd_micros) == (1_200, 998_800)


async def test_wire_format_is_camel_case(broker: NatsBroker, studio: Studio) -> None:
    msg = await broker.request(UsageQuery(organization_id=studio.org.id).to_bytes(), USAGE.subject, timeout=TIMEOUT)
    body = json.loads(msg.body)
    assert {"capUsdMicros", "spentUsdMicros", "remainingUsdMicros", "percentUsed", "resetsAt"} <= body.keys()


@pytest.mark.parametrize("ep", ENDPOINTS, ids=lambda ep: ep.subject)
async def test_malformed_request_gets_typed_error_and_consumer_keeps_serving(
    broker: NatsBroker, studio: Studio, new_conversation: Callable, ep: Endpoint
) -> None:
    for raw in MALFORMED[ep.subject]:
        msg = await broker.request(raw, ep.subject, timeout=TIMEOUT)
        assert (msg.headers or {}).get(ERROR_HEADER) == "invalid_request", raw
        error = ErrorReply.model_validate_json(msg.body)
        assert error.code == "invalid_request" and error.message
    payloads = valid_payloads(studio, await new_conversation(studio))
    assert isinstance(await request(broker, ep, payloads[ep.subject], timeout=TIMEOUT), ep.reply)


async def test_domain_errors_are_typed_replies(broker: NatsBroker, studio: Studio) -> None:
    with pytest.raises(RemoteError) as err:
        await request(broker, BUDGET_CHECK, BudgetCheck(organization_id=str(uuid.uuid4())), timeout=TIMEOUT)
    assert err.value.code == "not_found"
    with pytest.raises(RemoteError) as err:
        await request(broker, RESERVE, ReserveBudget(
            reservation_id="r", organization_id=studio.org.id, model="claude-imaginary-9", input_tokens=1, max_output_tokens=1,
        ), timeout=TIMEOUT)
    assert err.value.code == "invalid_request" and "claude-imaginary-9" in err.value.message
    with pytest.raises(RemoteError) as err:
        await request(broker, USAGE, UsageQuery(organization_id="not-a-uuid"), timeout=TIMEOUT)
    assert err.value.code == "invalid_request"
    assert isinstance(await request(broker, USAGE, UsageQuery(organization_id=studio.org.id), timeout=TIMEOUT), UsageSnapshot)
