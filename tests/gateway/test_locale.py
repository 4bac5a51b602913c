"""The caller's reply locale: `x-locale`, then `accept-language` (best q-value), then the user's
stored locale, then `en`; malformed values are passed over, never an error. Unit tests of the
parsing, then the real gateway over HTTP: the locale it resolves is the one on the SendMessage
command it publishes (read off the module's own NATS; no orchestrator runs there)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import nats
import pytest
from nats.aio.client import Client

from spotter_gateway.locales import MAX_LOCALE_CHARS, best_accept_language, normalize_tag, resolve_locale
from spotter_shared.contracts.commands import SEND_MESSAGE, SendMessage
from tests.e2e.client import auth
from tests.factories import Studio, make_studio


@pytest.mark.parametrize(
    ("raw", "tag"),
    [
        ("en", "en"),
        ("EN-us", "en-US"),
        ("he-il", "he-IL"),
        ("ru_RU", "ru-RU"),
        ("zh-hant-tw", "zh-Hant-TW"),
        ("es-419", "es-419"),
        (" de-CH-1996 ", "de-CH-1996"),
        # Longer than the column: extensions and private use go whole, then subtags from the end.
        ("en-US-u-ca-gregory-nu-latn", "en-US"),
        ("zh-yue-hant-hk-abcdefgh", "zh-yue-Hant-HK"),
    ],
)
def test_well_formed_tags_are_kept_in_canonical_case(raw: str, tag: str) -> None:
    assert normalize_tag(raw) == tag
    assert len(tag) <= MAX_LOCALE_CHARS


@pytest.mark.parametrize(
    "raw",
    [None, "", "   ", "*", "e", "en--us", "english please", "toolonglanguage", "x-klingon", "i-klingon",
     "ру", "en\x00", "<script>", "en;q=1", "a" * 300],
)
def test_malformed_tags_are_none(raw: str | None) -> None:
    assert normalize_tag(raw) is None


@pytest.mark.parametrize(
    ("header", "tag"),
    [
        ("he-IL,he;q=0.9,en;q=0.8", "he-IL"),
        ("en;q=0.5, ru;q=0.9", "ru"),
        ("da, en-gb;q=0.8, en;q=0.7", "da"),
        ("fr;q=0.7, de;q=0.7", "fr"),  # equals keep the header's order
        ("*, fr;q=0.1", "fr"),
        ("ru;q=0, de;q=0.1", "de"),  # q=0 means "not this one"
        ("!!;q=1, fr;q=0.2", "fr"),
        ("fr;q=abc, de;q=0.2", "de"),  # a malformed weight makes its range unusable
        ("en;q=1.5, it;q=0.3", "it"),
        ("en-US ; Q=0.4, he ; q=0.6", "he"),
        ("*", None),
        ("", None),
        (";;;,,,", None),
    ],
)
def test_accept_language_takes_the_best_weighted_well_formed_tag(header: str, tag: str | None) -> None:
    assert best_accept_language(header) == tag


def test_resolution_order() -> None:
    assert resolve_locale("he", "ru", "de") == "he"
    assert resolve_locale("nonsense here", "ru", "de") == "ru"
    assert resolve_locale(None, "*", "de") == "de"
    assert resolve_locale("", "", "???") == "en"
    assert resolve_locale(None, None, None) == "en"


# ---- through the gateway -------------------------------------------------------------------------

@pytest.fixture
async def commands(private_nats: str, gateway_url: str) -> AsyncIterator[Client]:
    client = await nats.connect(private_nats)
    yield client
    await client.close()


@pytest.fixture
async def studio(pool: asyncpg.Pool) -> Studio:
    return await make_studio(pool)


async def sent_locale(http: httpx.AsyncClient, commands: Client, studio: Studio, headers: dict[str, str | bytes]) -> str:
    """POST a message with these headers; the locale on the command the gateway publishes."""
    subscription = await commands.subscribe(SEND_MESSAGE.subject)
    try:
        async with http.stream(
            "POST", f"/organizations/{studio.org.id}/agent/messages",
            json={"message": "hello"}, headers={**auth(studio.owner.user_id), "Idempotency-Key": str(uuid.uuid4()), **headers},
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
        message = await subscription.next_msg(timeout=10)
    finally:
        await subscription.unsubscribe()
    return SendMessage.model_validate_json(message.data).actor.locale


async def test_x_locale_wins_then_accept_language_then_the_stored_locale_then_en(
        http: httpx.AsyncClient, commands: Client, pool: asyncpg.Pool, studio: Studio) -> None:
    await pool.execute("UPDATE users SET locale = 'pt-br' WHERE id = $1", uuid.UUID(studio.owner.user_id))
    assert await sent_locale(http, commands, studio, {"x-locale": "he-il", "accept-language": "ru"}) == "he-IL"
    assert await sent_locale(http, commands, studio, {"accept-language": "fr-CA;q=0.5, ru;q=0.9"}) == "ru"
    assert await sent_locale(http, commands, studio, {}) == "pt-BR"
    await pool.execute("UPDATE users SET locale = 'not a tag' WHERE id = $1", uuid.UUID(studio.owner.user_id))
    assert await sent_locale(http, commands, studio, {}) == "en"


@pytest.mark.parametrize(
    "garbage",
    [{"x-locale": "'; DROP TABLE users; --"}, {"x-locale": "x" * 4000}, {"x-locale": "*"},
     {"accept-language": "q=1;;,,;q=;"}, {"x-locale": "é".encode(), "accept-language": "עברית".encode()}],
)
async def test_garbage_locale_headers_fall_back_instead_of_failing(
        http: httpx.AsyncClient, commands: Client, studio: Studio, garbage: dict[str, str | bytes]) -> None:
    assert await sent_locale(http, commands, studio, garbage) == "en"
