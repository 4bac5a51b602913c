"""Issue 13's kernel (seed 002): an OpenAPI document's operations as tools, constraint rules in CEL
loaded with their lines and evaluated, and the classifier and healer of an external API's failures."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from spotter_tool_runner.packs import healing
from spotter_shared.packs.openapi import InvalidSpec, load_spec, operations
from spotter_shared.packs.rules import RuleError, evaluate, load_rules

DOORS = Path(__file__).parent / "data" / "doors.yaml"
SEED_RULES = Path(__file__).parents[2] / "shared" / "spotter_shared" / "packs" / "seed002_rules.yaml"


def test_operations_become_tools_with_resolved_schemas_and_defaults() -> None:
    tools = {op.tool_name: op for op in operations("doors", load_spec(DOORS.read_text()))}
    assert list(tools) == ["doors__listDoors", "doors__createDoor", "doors__getDoor", "doors__deleteDoor",
                           "doors__unlock_door", "doors__post__notices_send"]
    listing = tools["doors__listDoors"]
    assert (listing.side_effects, listing.confirm, listing.idempotent) == ("read", "never", True)
    assert listing.input_schema["properties"]["status"] == {"type": "string", "enum": ["open", "locked"],
                                                            "description": "Only doors in this state"}
    assert "required" not in listing.input_schema and listing.input_schema["additionalProperties"] is False
    create = tools["doors__createDoor"]
    body = create.input_schema["properties"]["body"]
    assert body["required"] == ["name"] and body["properties"]["zone"]["enum"] == ["front", "back", "gym"]  # $ref resolved
    assert create.input_schema["required"] == ["body"] and (create.side_effects, create.idempotent) == ("write", False)
    door = tools["doors__getDoor"]
    assert door.input_schema["required"] == ["doorId"] and door.input_schema["properties"]["doorId"]["format"] == "int64"
    assert door.summary == "One door with its schedule."  # the description when there is no summary
    delete = tools["doors__deleteDoor"]
    assert delete.confirm == "destructive" and [(p.key, p.location) for p in delete.parameters] == [("doorId", "path"), ("X-Reason", "header")]
    assert tools["doors__post__notices_send"].confirm == "always"  # "send" reaches people
    unlock = tools["doors__unlock_door"]  # "unlock door!" fitted to the API's name rules
    assert unlock.body == "json" and not unlock.body_required


def test_invalid_documents_are_refused_with_the_validators_message() -> None:
    with pytest.raises(InvalidSpec, match="not an OpenAPI 3 document"):
        load_spec("swagger: '2.0'\ninfo: {title: x, version: '1'}\npaths: {}\n")
    broken = DOORS.read_text().replace("responses: {\"204\": {description: gone}}", "responses: 7")
    with pytest.raises(InvalidSpec) as refused:
        load_spec(broken)
    assert "7" in str(refused.value)
    with pytest.raises(InvalidSpec, match="not YAML"):
        load_spec("openapi: [unclosed")
    with pytest.raises(ValueError, match="pack name"):
        operations("Bad Name", load_spec(DOORS.read_text()))


def test_seed_002s_rules_in_cel() -> None:
    rules = load_rules(SEED_RULES.read_text())
    assert [r.name for r in rules][:2] == ["confirm_destructive", "confirm_publish"]
    delete = {"name": "doors__deleteDoor", "mutates": True}
    context = {"role": "coach", "organizationId": "org-1", "conversationCostUsd": 0.1}
    assert evaluate(rules, tool=delete, params={"doorId": 4}, context=context).confirm.name == "confirm_destructive"
    config = {"name": "doors__updateSystemConfig", "mutates": True}
    assert evaluate(rules, tool=config, params={}, context=context).denied.name == "check_admin_only"
    assert evaluate(rules, tool=config, params={}, context={**context, "role": "admin"}).stops is None
    reading = {"name": "doors__listDoors", "mutates": False}
    costly = evaluate(rules, tool=reading, params={}, context={**context, "conversationCostUsd": 0.7})
    assert [w.name for w in costly.warnings] == ["llm_cost_limit"] and costly.stops is None
    assert evaluate(rules, tool=reading, params={}, context={**context, "conversationCostUsd": 1.2}).blocked.name == "llm_cost_block"
    other = evaluate(rules, tool=reading, params={"organizationId": "org-2"}, context=context)
    assert other.blocked.name == "no_cross_organization"
    # A condition over a key the call does not have does not match; it is reported, not raised.
    missing = evaluate(rules, tool=reading, params={}, context={"role": "owner", "organizationId": "org-1"})
    assert missing.stops is None and {r.name for r, _ in missing.errors} == {"llm_cost_limit", "llm_cost_block"}


@pytest.mark.parametrize(("text", "expected"), [
    ("rules:\n  - name: a\n    condition: 'tool.name ==== 1'\n    action: block\n", "line 2: rule a: the condition does not parse"),
    ("rules:\n  - name: a\n    condition: 'true'\n    action: explode\n", "line 2: rule a: action must be one of"),
    ("rules:\n  - name: a\n    condition: 'true'\n    action: block\n  - name: a\n    condition: 'true'\n    action: warn\n",
     "line 5: each rule needs a unique name"),
    ("rules:\n  - name: a\n    condition: 'true'\n    action: check_permission\n", "line 2: rule a: check_permission needs"),
    ("rules:\n  - name: a\n    condition: 'true'\n    action: warn\n    colour: red\n", "line 2: unknown field(s) colour"),
    ("rules: 3\n", "expected a top-level `rules:` list"),
])
def test_a_rule_that_does_not_load_is_refused_with_its_line(text: str, expected: str) -> None:
    with pytest.raises(RuleError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_rules(text)


def _responses(*answers: int | Exception, headers: dict[str, str] | None = None):
    queue = list(answers)

    async def send() -> httpx.Response:
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer, headers=headers or {}, request=httpx.Request("GET", "http://x"))
    return send


async def _no_wait(seconds: float) -> None:
    waits.append(seconds)


waits: list[float] = []


async def test_a_503_then_200_heals_and_says_so() -> None:
    waits.clear()
    healed = await healing.call_with_healing(_responses(503, 200), retry_writes=True, sleep=_no_wait)
    assert healed.ok and healed.healed and healed.summary() == "2 attempts: 503 retryable, then 200"
    assert [a.status for a in healed.attempts] == [503, 200] and waits == [0.5]


async def test_retry_after_is_honoured_and_retries_are_bounded() -> None:
    waits.clear()
    healed = await healing.call_with_healing(_responses(429, 429, 429, 200, headers={"Retry-After": "2"}),
                                             retry_writes=True, sleep=_no_wait)
    assert not healed.ok and healed.classified.category == "retryable" and len(healed.attempts) == 3 and waits == [2.0, 2.0]
    waits.clear()
    network = await healing.call_with_healing(_responses(httpx.ConnectError("refused"), 200), retry_writes=True, sleep=_no_wait)
    assert network.ok and network.attempts[0].reason == "ConnectError"


async def test_writes_are_not_retried_without_idempotency() -> None:
    healed = await healing.call_with_healing(_responses(503, 200), retry_writes=False, sleep=_no_wait)
    assert not healed.ok and len(healed.attempts) == 1 and healed.classified.guidance


@pytest.mark.parametrize(("status", "category"), [(400, "user_fixable"), (422, "user_fixable"), (401, "permission"),
                                                  (403, "permission"), (404, "fatal"), (500, "retryable")])
def test_the_classifier(status: int, category: str) -> None:
    assert healing.classify(httpx.Response(status)).category == category


async def test_a_conflict_is_refreshed_and_retried_once() -> None:
    refreshed = []

    async def refresh() -> None:
        refreshed.append(True)

    healed = await healing.call_with_healing(_responses(409, 409), retry_writes=True, refresh=refresh, sleep=_no_wait)
    assert refreshed == [True] and [a.category for a in healed.attempts] == ["conflict", "conflict"] and not healed.ok
    fixed = await healing.call_with_healing(_responses(409, 200), retry_writes=True, refresh=refresh, sleep=_no_wait)
    assert fixed.ok and fixed.summary() == "2 attempts: 409 conflict, then 200"


# Calls ------------------------------------------------------------------------------------------------

from spotter_tool_runner.packs.calls import REDACTED, call_operation, request_of  # noqa: E402

KEY = "sk_test_DOORS_secret"


def _tools() -> dict:
    return {op.tool_name: op for op in operations("doors", load_spec(DOORS.read_text()))}


def test_the_request_is_built_from_the_operation() -> None:
    tools = _tools()
    request, twice = request_of(tools["doors__deleteDoor"], "http://doors.local/api/", {"doorId": "7/../8", "X-Reason": "moved"},
                                {"X-Api-Key": KEY, "X-Reason": "pack wins"}, None)
    assert (request.method, str(request.url)) == ("DELETE", "http://doors.local/api/doors/7%2F..%2F8")
    assert request.headers["x-api-key"] == KEY and request.headers["x-reason"] == "pack wins" and twice
    request, twice = request_of(tools["doors__listDoors"], "http://doors.local/api", {"status": "open", "limit": 5}, {}, None)
    assert str(request.url) == "http://doors.local/api/doors?status=open&limit=5" and twice
    request, twice = request_of(tools["doors__createDoor"], "http://doors.local/api", {"body": {"name": "Front"}}, {}, "conv:toolu_1")
    assert json_body(request) == {"name": "Front"} and request.headers["content-type"] == "application/json"
    assert "idempotency-key" not in request.headers and not twice  # this API takes no key: a POST is sent once


def json_body(request) -> dict:
    import json
    return json.loads(request.content)


async def test_a_call_heals_reports_and_never_returns_the_key() -> None:
    seen: list[httpx.Request] = []
    answers = iter([httpx.Response(503), httpx.Response(200, json={"id": 7, "echo": f"key was {KEY}"})])

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return next(answers)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler), timeout=5) as client:
        result = await call_operation(client, _tools()["doors__getDoor"], "http://doors.local/api", {"doorId": 7},
                                      {"X-Api-Key": KEY}, sleep=_no_wait)
    assert result.ok and result.healed.summary() == "2 attempts: 503 retryable, then 200" and len(seen) == 2
    assert result.body == {"id": 7, "echo": f"key was {REDACTED}"} and KEY not in str(result.body)


async def test_a_422_comes_back_user_fixable_with_what_the_service_said() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json={"detail": "name is required"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler), timeout=5) as client:
        result = await call_operation(client, _tools()["doors__createDoor"], "http://doors.local/api", {"body": {}}, {},
                                      sleep=_no_wait)
    assert not result.ok and result.healed.classified.category == "user_fixable" and result.body == {"detail": "name is required"}
    assert len(result.healed.attempts) == 1


def test_a_write_is_safe_twice_only_with_an_idempotency_key_the_api_takes() -> None:
    text = DOORS.read_text().replace(
        "      operationId: createDoor\n      summary: Add a door\n",
        "      operationId: createDoor\n      summary: Add a door\n      parameters:\n"
        "        - {name: Idempotency-Key, in: header, schema: {type: string}}\n")
    create = {op.tool_name: op for op in operations("doors", load_spec(text))}["doors__createDoor"]
    request, twice = request_of(create, "http://doors.local/api", {"body": {"name": "Front"}}, {}, "conv:toolu_1")
    assert request.headers["idempotency-key"] == "conv:toolu_1" and twice
    _, twice = request_of(create, "http://doors.local/api", {"body": {"name": "Front"}}, {}, None)
    assert not twice


def test_the_petstore_document_becomes_tools_a_model_can_call() -> None:
    """The document nobody here wrote (npm's @readme/oas-examples): OAS 3.0 schemas made JSON Schema,
    a URL-encoded form body sent as a form, an optional multipart body left out."""
    from tests.petstore import PETSTORE_SPEC

    ops = {op.operation_id: op for op in operations("pets", load_spec(PETSTORE_SPEC.read_text()))}
    assert len(ops) == 20 and ops["deletePet"].confirm == "destructive" and ops["getPetById"].side_effects == "read"
    form = ops["updatePetWithForm"]
    assert (form.body, form.input_schema["properties"]["body"]["properties"]["status"]["type"]) == ("form", "string")
    request, safe = request_of(form, "http://pets.local/v2", {"petId": 7, "body": {"name": "Rex", "status": "sold"}},
                               {"api_key": "k"}, None)
    assert (request.headers["content-type"], request.content) == ("application/x-www-form-urlencoded", b"name=Rex&status=sold")
    assert str(request.url) == "http://pets.local/v2/pet/7" and not safe  # a POST without an idempotency key
    assert "body" not in ops["uploadFile"].input_schema["properties"]
