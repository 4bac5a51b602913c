"""A tool pack run by the tool-runner (seed 002) against the Swagger Petstore document — one nobody here
wrote, installed from npm — served by tests/petstore.py on this machine, with real Postgres: the tools
of the organizations that enabled it and of no other; reads; DELETE held and run once; rules that block,
deny, ask for a confirmation and warn; healing; typed failures; the key never leaving the runner."""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from spotter_cli.packs import add, remove
from spotter_shared.contracts.tools import CallsQuery, CatalogRequest
from spotter_tool_runner.packs.registry import PackRegistry
from spotter_tool_runner.runner import ToolRunner
from spotter_tool_runner.tools import REGISTRY

from tests.factories import Studio, make_studio
from tests.petstore import PETSTORE_SPEC, Petstore

from .helpers import actor_of, audit_rows, execution_rows, failed, new_conversation, succeeded

SECRET = "sk_live_PETSTORE_7f3a9c_never_shown"
ORG_RULES = """
rules:
  - name: no_touching_bubbles
    condition: 'has(params.petId) && params.petId == 3'
    action: block
    message: Bubbles is not ours to change.
  - name: sold_pets_need_a_yes
    condition: 'tool.operationId == "findPetsByStatus" && has(params.status) && "sold" in params.status'
    action: require_confirmation
    message: Listing sold pets shares buyers' data; confirm first.
  - name: only_owners_delete_orders
    condition: 'tool.operationId == "deleteOrder"'
    action: check_permission
    roles: [owner]
    message: Only the owner may delete an order.
"""


@pytest.fixture
def store() -> Iterator[Petstore]:
    with Petstore(api_key=SECRET) as served:
        yield served


@pytest.fixture
async def enabled(pool: asyncpg.Pool, store: Petstore, tmp_path: Path) -> AsyncIterator[tuple[str, Studio, Studio]]:
    """A pack of the petstore, enabled for one studio (with its own rules) and not for another."""
    studio, other = await make_studio(pool), await make_studio(pool)
    name = f"pets{uuid.uuid4().hex[:6]}"
    rules = tmp_path / "org.yaml"
    rules.write_text(ORG_RULES)
    args = argparse.Namespace(name=name, spec=str(PETSTORE_SPEC), base_url=store.base_url, org=[studio.org.id],
                              header=[f"api_key: {SECRET}"], rules=None, org_rules=str(rules))
    async with pool.acquire() as conn:
        await add(conn, args)
    yield name, studio, other
    async with pool.acquire() as conn:
        await remove(conn, name)


@pytest.fixture
async def runner(pool: asyncpg.Pool) -> AsyncIterator[ToolRunner]:
    async with httpx.AsyncClient(timeout=5) as client:
        packs = PackRegistry(pool, client, reserved={d.router for d in REGISTRY}, ttl_s=300)
        await packs.start()
        try:
            yield ToolRunner(pool, REGISTRY, packs=packs)
        finally:
            await packs.stop()


async def test_the_tools_are_the_enabling_organizations_only(runner: ToolRunner, enabled) -> None:
    name, studio, other = enabled
    mine = (await runner.catalog(CatalogRequest(role="owner", organization_id=studio.org.id))).tools
    theirs = (await runner.catalog(CatalogRequest(role="owner", organization_id=other.org.id))).tools
    packs = {t.name: t for t in mine if t.pack == name}
    assert len(packs) == 20 and not [t for t in theirs if t.pack == name]
    assert mine[: len(REGISTRY.for_role("owner"))] == REGISTRY.for_role("owner")  # Spotter's own first, unchanged
    get, delete, add_pet = packs[f"{name}__getPetById"], packs[f"{name}__deletePet"], packs[f"{name}__addPet"]
    assert (get.side_effects, get.confirm, delete.side_effects, delete.confirm) == ("read", "never", "write", "destructive")
    assert get.input_schema["required"] == ["petId"] and get.input_schema["properties"]["petId"]["type"] == "integer"
    assert add_pet.input_schema["properties"]["body"]["properties"]["status"]["enum"] == ["available", "pending", "sold"]
    assert "Swagger Petstore" in get.summary
    member = (await runner.catalog(CatalogRequest(role="member", organization_id=studio.org.id))).tools
    assert not [t for t in member if t.pack == name]


async def test_a_read_sends_the_key_and_never_shows_it(pool, runner: ToolRunner, store: Petstore, enabled) -> None:
    name, studio, _ = enabled
    conv = await new_conversation(pool, studio)
    cmd = conv.command(name, "getPetById", {"petId": 1})
    out = succeeded(await runner.execute(cmd))
    assert (out["status"], out["body"]["name"], out["attempts"]) == (200, "Rex", 1)
    assert store.requests[-1].headers["api_key"] == SECRET
    [row] = await execution_rows(pool, conv.id, cmd.tool_use_id)
    assert SECRET not in json.dumps(out) and SECRET not in json.dumps(row["output"])


async def test_another_organization_cannot_call_them(pool, runner: ToolRunner, store: Petstore, enabled) -> None:
    name, _, other = enabled
    conv = await new_conversation(pool, other)
    failed(await runner.execute(conv.command(name, "getPetById", {"petId": 1})), "unknown_tool")
    assert store.requests == []


async def test_a_delete_is_held_then_runs_once(pool, runner: ToolRunner, store: Petstore, enabled) -> None:
    name, studio, _ = enabled
    conv = await new_conversation(pool, studio)
    held = await runner.execute(conv.command(name, "deletePet", {"petId": 2}, tool_use_id="toolu_del", hold=True))
    # Held by its method (DELETE is destructive); seed 002's default rules say why.
    assert (held.status, held.gate and held.gate.rule) == ("pending", "confirm_destructive")
    assert store.count("DELETE", "/pet/2") == 0
    approved = conv.command(name, "deletePet", {"petId": 2}, tool_use_id="toolu_del").model_copy(update={"approved": True})
    out = succeeded(await runner.execute(approved))
    again = await runner.execute(approved)
    assert out["status"] == 200 and again.replayed and store.count("DELETE", "/pet/2") == 1 and 2 not in store.pets
    [audit] = await audit_rows(pool, "toolu_del")
    assert (audit["action"], audit["resource"]) == (f"{name}.deletePet", name)
    assert audit["metadata"] | {"pack": name, "httpStatus": 200, "attempts": 1} == audit["metadata"]


async def test_rules_block_deny_and_confirm(pool, runner: ToolRunner, store: Petstore, enabled) -> None:
    name, studio, _ = enabled
    owner, coach = await new_conversation(pool, studio), await new_conversation(pool, studio, studio.coach)
    blocked = failed(await runner.execute(owner.command(name, "getPetById", {"petId": 3})), "blocked_by_rule")
    assert blocked.message == "Bubbles is not ours to change."
    held = await runner.execute(coach.command(name, "deleteOrder", {"orderId": 1}, hold=True))
    assert failed(held, "forbidden").message == "Only the owner may delete an order."  # refused before anyone is asked
    assert store.requests == []

    cmd = owner.command(name, "findPetsByStatus", {"status": ["sold"]})
    pending = await runner.execute(cmd)
    assert (pending.status, pending.gate and pending.gate.rule) == ("pending", "sold_pets_need_a_yes")
    [state] = (await runner.calls(CallsQuery(conversation_id=owner.id, tool_use_ids=[cmd.tool_use_id], actor=owner.actor))).calls
    assert (state.status, state.gate and state.gate.message) == ("pending", "Listing sold pets shares buyers' data; confirm first.")
    assert store.requests == []
    out = succeeded(await runner.execute(cmd.model_copy(update={"approved": True})))
    assert [p["name"] for p in out["body"]] == ["Bubbles"]
    assert succeeded(await runner.execute(owner.command(name, "findPetsByStatus", {"status": ["available"]})))["status"] == 200


async def test_seed_002_cost_guards_warn_then_block(pool, runner: ToolRunner, store: Petstore, enabled) -> None:
    name, studio, _ = enabled
    conv = await new_conversation(pool, studio)
    cheap = conv.command(name, "getInventory").model_copy(update={"conversation_cost_usd_micros": 400_000})
    assert "warnings" not in succeeded(await runner.execute(cheap))
    warm = conv.command(name, "getInventory").model_copy(update={"conversation_cost_usd_micros": 600_000})
    assert succeeded(await runner.execute(warm))["warnings"] == [
        "Approaching cost limit ($0.50). Consider completing the current task."]
    hot = conv.command(name, "getInventory").model_copy(update={"conversation_cost_usd_micros": 1_000_001})
    assert "Cost limit reached" in failed(await runner.execute(hot), "blocked_by_rule").message
    assert store.count("GET", "/store/inventory") == 2


async def test_healing_retries_what_is_safe_to_send_twice(pool, runner: ToolRunner, store: Petstore, enabled) -> None:
    name, studio, _ = enabled
    conv = await new_conversation(pool, studio)
    store.fail_next("PUT", "/pet", 503)
    cmd = conv.command(name, "updatePet", {"body": {"id": 1, "name": "Rex II", "photoUrls": []}})
    out = succeeded(await runner.execute(cmd))
    assert (out["status"], out["attempts"], out["healing"]) == (200, 2, "2 attempts: 503 retryable, then 200")
    assert store.pets[1]["name"] == "Rex II" and store.count("PUT", "/pet") == 2
    [audit] = await audit_rows(pool, cmd.tool_use_id)
    assert (audit["metadata"]["attempts"], audit["metadata"]["healing"]) == (2, "2 attempts: 503 retryable, then 200")

    store.fail_next("POST", "/pet", 503)  # a POST without an idempotency key is not sent twice
    error = failed(await runner.execute(conv.command(name, "addPet", {"body": {"name": "Kiwi", "photoUrls": []}})),
                   "retryable")
    assert "1 attempt: 503 retryable" in error.message and store.count("POST", "/pet") == 1 and error.hint


async def test_a_422_comes_back_user_fixable_with_the_fields(pool, runner: ToolRunner, store: Petstore, enabled) -> None:
    name, studio, _ = enabled
    conv = await new_conversation(pool, studio)
    error = failed(await runner.execute(conv.command(name, "addPet", {"body": {"name": " ", "photoUrls": []}})),
                   "user_fixable")
    assert "422" in error.message and "name" in error.message and "correct the fields" in (error.hint or "")
    bad = failed(await runner.execute(conv.command(name, "getPetById", {"petId": "one"})), "invalid_input")
    assert "petId" in bad.message and store.count("POST", "/pet") == 1 and store.count("GET", "/pet/one") == 0


async def test_a_removed_pack_is_gone_without_a_restart(pool, runner: ToolRunner, store: Petstore, tmp_path) -> None:
    studio = await make_studio(pool)
    name = f"pets{uuid.uuid4().hex[:6]}"
    args = argparse.Namespace(name=name, spec=str(PETSTORE_SPEC), base_url=store.base_url, org=[studio.org.slug],
                              header=[], rules=None, org_rules=None)
    request = CatalogRequest(role="admin", organization_id=studio.org.id)
    await runner.catalog(request)  # loaded before the pack exists; the TTL (300 s) would keep this snapshot
    async with pool.acquire() as conn:
        await add(conn, args)
    assert await _eventually(lambda: _has_pack(runner, request, name))
    async with pool.acquire() as conn:
        await remove(conn, name)
    assert await _eventually(lambda: _lacks_pack(runner, request, name))


async def _has_pack(runner: ToolRunner, request: CatalogRequest, name: str) -> bool:
    return any(t.pack == name for t in (await runner.catalog(request)).tools)


async def _lacks_pack(runner: ToolRunner, request: CatalogRequest, name: str) -> bool:
    return not await _has_pack(runner, request, name)


async def _eventually(check, timeout_s: float = 5.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.05)
    return False
