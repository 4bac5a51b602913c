"""The in-process Swagger Petstore (tests/e2e/petstore.py) itself: auth, operations, validation, faults."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import yaml

from tests.petstore import Petstore, petstore, petstore_spec_text  # noqa: F401 — the fixture

PET = {"name": "Kiwi", "photoUrls": ["https://example.com/kiwi.png"], "status": "available"}


@pytest.fixture
def api(petstore: Petstore) -> Iterator[httpx.Client]:  # noqa: F811 — the imported fixture
    with httpx.Client(base_url=petstore.base_url, headers={"api_key": petstore.api_key}, timeout=5) as client:
        yield client


def test_npm_document_is_the_petstore() -> None:
    spec = yaml.safe_load(petstore_spec_text())
    assert spec["info"]["title"] == "Swagger Petstore"
    assert spec["servers"] == [{"url": "http://petstore.swagger.io/v2"}]
    assert {"/pet", "/pet/findByStatus", "/pet/{petId}", "/store/inventory", "/store/order"} <= set(spec["paths"])


def test_requests_without_the_api_key_are_refused(petstore: Petstore) -> None:  # noqa: F811
    response = httpx.get(f"{petstore.base_url}/pet/1", timeout=5)
    assert response.status_code == 401
    assert response.json()["code"] == 401
    assert petstore.requests[-1].path == "/pet/1"
    assert "api_key" not in petstore.requests[-1].headers


def test_get_pet_by_id(api: httpx.Client) -> None:
    rex = api.get("/pet/1")
    assert rex.status_code == 200
    assert rex.json()["name"] == "Rex" and rex.json()["status"] == "available"
    missing = api.get("/pet/99")
    assert missing.status_code == 404
    assert missing.json() == {"code": 404, "message": "Pet not found"}
    assert api.get("/pet/rex").status_code == 400


async def test_async_clients_share_the_sync_fixture(petstore: Petstore) -> None:  # noqa: F811
    async with httpx.AsyncClient(base_url=petstore.base_url, headers={"api_key": petstore.api_key}) as client:
        found = await client.get("/pet/findByStatus", params=[("status", "pending"), ("status", "sold")])
        inventory = await client.get("/store/inventory")
    assert sorted(p["name"] for p in found.json()) == ["Bubbles", "Mittens"]
    assert petstore.requests[-2].query == {"status": ["pending", "sold"]}
    assert inventory.json() == {"available": 1, "pending": 1, "sold": 1}


def test_add_pet_and_blank_name_validation(petstore: Petstore, api: httpx.Client) -> None:  # noqa: F811
    added = api.post("/pet", json=PET)
    assert added.status_code == 200
    assert petstore.pets[added.json()["id"]]["name"] == "Kiwi"
    blank = api.post("/pet", json=PET | {"name": "  ", "status": "lost"})
    assert blank.status_code == 422
    assert blank.json() == {"code": 422, "message": "Validation failed",
                            "fields": {"name": "must not be empty", "status": "must be one of available, pending, sold"}}
    assert petstore.requests[-1].json == PET | {"name": "  ", "status": "lost"}
    assert len(petstore.pets) == 4


def test_fail_next_answers_the_fault_then_the_store(petstore: Petstore, api: httpx.Client) -> None:  # noqa: F811
    petstore.fail_next("GET", "/pet/1", 503, retry_after="2")
    faulted = api.get("/pet/1")
    assert faulted.status_code == 503
    assert faulted.headers["retry-after"] == "2"
    assert faulted.json() == {"code": 503, "message": "Service Unavailable"}
    assert api.get("/pet/1").status_code == 200
    assert petstore.count("GET", "/pet/1") == 2


def test_delete_pet(petstore: Petstore, api: httpx.Client) -> None:  # noqa: F811
    deleted = api.delete("/pet/1")
    assert deleted.json() == {"code": 200, "message": "deleted 1"}
    assert 1 not in petstore.pets
    assert petstore.count("DELETE", "/pet/1") == 1
    assert api.delete("/pet/1").status_code == 404
