"""The Swagger Petstore, served in-process for the tool-pack tests.

The OpenAPI document is a third party's (npm `@readme/oas-examples`, installed into tests/openapi by
scripts/bootstrap.sh, never committed); `Petstore` implements its pet and store operations in memory,
under the document's `/v2` prefix, on a free port of 127.0.0.1. Every request is recorded, the
`api_key` header is required, and `fail_next` makes chosen requests fail, so tests can watch what a
generated tool sent and how it copes with errors.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from tests.servers import serve_in_thread

PETSTORE_SPEC: Path = (
    Path(__file__).resolve().parent / "openapi/node_modules/@readme/oas-examples/3.0/yaml/petstore.yaml"
)
PREFIX = "/v2"  # the document's server is http://petstore.swagger.io/v2
PET_STATUSES = ("available", "pending", "sold")
ORDER_STATUSES = ("placed", "approved", "delivered")


def petstore_spec_text() -> str:
    """The npm-installed petstore.yaml; a clear error when scripts/bootstrap.sh has not installed it."""
    if not PETSTORE_SPEC.is_file():
        raise FileNotFoundError(
            f"{PETSTORE_SPEC} is missing: run scripts/bootstrap.sh (it runs `npm ci` in tests/openapi)"
        )
    return PETSTORE_SPEC.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Recorded:
    """One request as it arrived. `path` is relative to `Petstore.base_url` ("/pet/1"); a request
    outside the /v2 prefix keeps its full path. `json` is the parsed body, None when absent or not JSON."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    json: Any


@dataclass
class _Fault:
    status: int
    remaining: int
    retry_after: str | None
    body: dict[str, Any]


def _api_response(status: int, message: str, **extra: Any) -> JSONResponse:
    """The document's ApiResponse shape: {"code": status, "message": ..., **extra}."""
    return JSONResponse({"code": status, "message": message, **extra}, status_code=status)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _path_id(request: Request, name: str) -> int | None:
    """The integer path parameter `name`, None when it is not one."""
    try:
        return int(request.path_params[name])
    except ValueError:
        return None


async def _json_object(request: Request) -> dict[str, Any] | None:
    """The body as a JSON object, None when it is not one."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _pet_errors(pet: dict[str, Any]) -> dict[str, str]:
    """What is wrong with `pet` against the document's Pet schema, field by field."""
    errors: dict[str, str] = {}
    name = pet.get("name")
    if name is None:
        errors["name"] = "is required"
    elif not isinstance(name, str):
        errors["name"] = "must be a string"
    elif not name.strip():
        errors["name"] = "must not be empty"
    photo_urls = pet.get("photoUrls")
    if photo_urls is None:
        errors["photoUrls"] = "is required"
    elif not isinstance(photo_urls, list) or not all(isinstance(url, str) for url in photo_urls):
        errors["photoUrls"] = "must be a list of strings"
    if "status" in pet and pet["status"] not in PET_STATUSES:
        errors["status"] = f"must be one of {', '.join(PET_STATUSES)}"
    if "category" in pet and not isinstance(pet["category"], dict):
        errors["category"] = "must be an object"
    if "tags" in pet and not (isinstance(pet["tags"], list) and all(isinstance(t, dict) for t in pet["tags"])):
        errors["tags"] = "must be a list of objects"
    return errors


def _stored_pet(pet_id: int, pet: dict[str, Any]) -> dict[str, Any]:
    """The Pet schema's properties of `pet` under `pet_id`; other keys are dropped."""
    return {"id": pet_id} | {k: pet[k] for k in ("category", "name", "photoUrls", "tags", "status") if k in pet}


def _seed_pets() -> dict[int, dict[str, Any]]:
    return {
        1: {"id": 1, "category": {"id": 1, "name": "Dogs"}, "name": "Rex",
            "photoUrls": ["https://example.com/rex.png"], "tags": [{"id": 1, "name": "friendly"}], "status": "available"},
        2: {"id": 2, "category": {"id": 2, "name": "Cats"}, "name": "Mittens",
            "photoUrls": ["https://example.com/mittens.png"], "tags": [{"id": 2, "name": "indoor"}], "status": "pending"},
        3: {"id": 3, "category": {"id": 3, "name": "Fish"}, "name": "Bubbles",
            "photoUrls": ["https://example.com/bubbles.png"], "tags": [], "status": "sold"},
    }


class Petstore:
    """The petstore's state and its HTTP app; `with Petstore() as store:` serves it at `store.base_url`.

    Each request is recorded first, then answered by a pending fault (see `fail_next`), else refused
    with 401 without the right `api_key` header, else served from `pets` and `orders`.
    """

    def __init__(self, api_key: str = "special-key") -> None:  # the document's own example key
        self.api_key = api_key
        self.pets: dict[int, dict[str, Any]] = _seed_pets()
        self.orders: dict[int, dict[str, Any]] = {}
        self.requests: list[Recorded] = []
        self._faults: dict[tuple[str, str], deque[_Fault]] = {}
        self._lock = threading.Lock()
        self._base_url: str | None = None
        self._serving = contextlib.ExitStack()
        self.app = Starlette(
            routes=[Mount(PREFIX, routes=[
                Route("/pet", self._add_pet, methods=["POST"]),
                Route("/pet", self._update_pet, methods=["PUT"]),
                Route("/pet/findByStatus", self._find_pets_by_status, methods=["GET"]),
                Route("/pet/{petId}", self._get_pet_by_id, methods=["GET"]),
                Route("/pet/{petId}", self._delete_pet, methods=["DELETE"]),
                Route("/store/inventory", self._get_inventory, methods=["GET"]),
                Route("/store/order", self._place_order, methods=["POST"]),
                Route("/store/order/{orderId}", self._get_order_by_id, methods=["GET"]),
                Route("/store/order/{orderId}", self._delete_order, methods=["DELETE"]),
            ])],
            middleware=[Middleware(BaseHTTPMiddleware, dispatch=self._gate)],
            exception_handlers={HTTPException: self._http_error},
        )

    @property
    def base_url(self) -> str:
        """The served API's root, http://127.0.0.1:PORT/v2."""
        if self._base_url is None:
            raise RuntimeError("the petstore is not being served: use `with Petstore() as store:`")
        return self._base_url

    def __enter__(self) -> Petstore:
        url = self._serving.enter_context(serve_in_thread(self.app, "petstore"))
        self._base_url = f"{url}{PREFIX}"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._base_url = None
        self._serving.close()

    def fail_next(self, method: str, path: str, status: int, times: int = 1,
                  retry_after: str | None = None, body: dict[str, Any] | None = None) -> None:
        """Answer the next `times` `method` requests to exactly `path` (relative to base_url, no query,
        e.g. "/pet/1") with `status`, a Retry-After header when given, and `body` (default
        {"code": status, "message": <reason>}), leaving the store untouched. Faults queue up in order."""
        if times < 1:
            raise ValueError("times must be at least 1")
        fault = _Fault(status, times, retry_after, body if body is not None else
                       {"code": status, "message": HTTPStatus(status).phrase})
        with self._lock:
            self._faults.setdefault((method.upper(), path), deque()).append(fault)

    def count(self, method: str, path: str) -> int:
        """How many `method` requests to exactly `path` (as in `fail_next`) arrived, faulted ones included."""
        return sum(1 for r in list(self.requests) if r.method == method.upper() and r.path == path)

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            queue = self._faults.get((method, path))
            if not queue:
                return None
            fault = queue[0]
            fault.remaining -= 1
            if fault.remaining == 0:
                queue.popleft()
            return fault

    async def _gate(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if path == PREFIX or path.startswith(f"{PREFIX}/"):
            path = path[len(PREFIX):]
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        query: dict[str, list[str]] = {}
        for key, value in request.query_params.multi_items():
            query.setdefault(key, []).append(value)
        self.requests.append(Recorded(
            method=request.method, path=path, query=query,
            headers=dict(request.headers.items()), json=body,  # Starlette lower-cases header names
        ))
        fault = self._take_fault(request.method, path)
        if fault is not None:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
            return JSONResponse(fault.body, status_code=fault.status, headers=headers)
        if request.headers.get("api_key") != self.api_key:
            return _api_response(401, "Missing or invalid api_key header")
        return await call_next(request)

    async def _http_error(self, request: Request, exc: HTTPException) -> Response:
        """Unknown paths (404) and methods (405) answer in the ApiResponse shape too."""
        return JSONResponse({"code": exc.status_code, "message": exc.detail},
                            status_code=exc.status_code, headers=exc.headers)

    async def _add_pet(self, request: Request) -> Response:
        pet = await _json_object(request)
        if pet is None:
            return _api_response(400, "Invalid input: the body must be a JSON object")
        if errors := _pet_errors(pet):
            return _api_response(422, "Validation failed", fields=errors)
        pet_id = max(self.pets, default=0) + 1  # Pet.id is readOnly: the store assigns it
        self.pets[pet_id] = _stored_pet(pet_id, pet)
        return JSONResponse(self.pets[pet_id])

    async def _update_pet(self, request: Request) -> Response:
        pet = await _json_object(request)
        if pet is None:
            return _api_response(400, "Invalid input: the body must be a JSON object")
        pet_id = pet.get("id")
        if not _is_int(pet_id):
            return _api_response(400, "Invalid ID supplied")
        if errors := _pet_errors(pet):
            return _api_response(422, "Validation failed", fields=errors)
        if pet_id not in self.pets:
            return _api_response(404, "Pet not found")
        self.pets[pet_id] = _stored_pet(pet_id, pet)
        return JSONResponse(self.pets[pet_id])

    async def _find_pets_by_status(self, request: Request) -> Response:
        wanted = {s.strip() for value in request.query_params.getlist("status") for s in value.split(",") if s.strip()}
        if not wanted or not wanted <= set(PET_STATUSES):
            return _api_response(400, "Invalid status value")
        return JSONResponse([pet for pet in self.pets.values() if pet.get("status") in wanted])

    async def _get_pet_by_id(self, request: Request) -> Response:
        pet_id = _path_id(request, "petId")
        if pet_id is None:
            return _api_response(400, "Invalid ID supplied")
        if pet_id not in self.pets:
            return _api_response(404, "Pet not found")
        return JSONResponse(self.pets[pet_id])

    async def _delete_pet(self, request: Request) -> Response:
        pet_id = _path_id(request, "petId")
        if pet_id is None:
            return _api_response(400, "Invalid ID supplied")
        if self.pets.pop(pet_id, None) is None:
            return _api_response(404, "Pet not found")
        return _api_response(200, f"deleted {pet_id}")

    async def _get_inventory(self, request: Request) -> Response:
        counts = Counter(pet["status"] for pet in self.pets.values() if "status" in pet)
        return JSONResponse({status: counts[status] for status in PET_STATUSES})

    async def _place_order(self, request: Request) -> Response:
        order = await _json_object(request)
        if order is None:
            return _api_response(400, "Invalid Order: the body must be a JSON object")
        errors: dict[str, str] = {}
        pet_id = order.get("petId")
        if not _is_int(pet_id):
            errors["petId"] = "is required and must be an integer"
        elif pet_id not in self.pets:
            errors["petId"] = "no pet has this id"
        if "quantity" in order and not (_is_int(order["quantity"]) and order["quantity"] >= 1):
            errors["quantity"] = "must be a positive integer"
        if "shipDate" in order and not isinstance(order["shipDate"], str):
            errors["shipDate"] = "must be a date-time string"
        if "status" in order and order["status"] not in ORDER_STATUSES:
            errors["status"] = f"must be one of {', '.join(ORDER_STATUSES)}"
        if "complete" in order and not isinstance(order["complete"], bool):
            errors["complete"] = "must be a boolean"
        if errors:
            return _api_response(422, "Validation failed", fields=errors)
        order_id = max(self.orders, default=0) + 1
        stored = {"id": order_id, "petId": pet_id, "quantity": order.get("quantity", 1)}
        if "shipDate" in order:
            stored["shipDate"] = order["shipDate"]
        stored |= {"status": order.get("status", "placed"), "complete": order.get("complete", False)}
        self.orders[order_id] = stored
        return JSONResponse(stored)

    async def _get_order_by_id(self, request: Request) -> Response:
        order_id = _path_id(request, "orderId")
        if order_id is None or order_id < 1:
            return _api_response(400, "Invalid ID supplied")
        if order_id not in self.orders:
            return _api_response(404, "Order not found")
        return JSONResponse(self.orders[order_id])

    async def _delete_order(self, request: Request) -> Response:
        order_id = _path_id(request, "orderId")
        if order_id is None or order_id < 1:
            return _api_response(400, "Invalid ID supplied")
        if self.orders.pop(order_id, None) is None:
            return _api_response(404, "Order not found")
        return _api_response(200, f"deleted {order_id}")


@pytest.fixture
def petstore() -> Iterator[Petstore]:
    """A fresh, served petstore per test (sync, so sync and async tests can both use it)."""
    with Petstore() as store:
        yield store
