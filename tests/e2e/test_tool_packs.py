"""Issue 13's proof, end to end over HTTP+SSE with the simulator as the model: a studio connects the Swagger
Petstore (a document nobody here wrote, installed from npm) with `spotter packs add`, served by an
implementation on this machine (tests/petstore.py). The tools appear for that studio and no other; a
read works; a DELETE asks for confirmation and runs once after approval; rules block and ask; a 503 then
200 heals; a 422 comes back user_fixable; and the API key appears in no log, event, stored row, trace or
request to the model."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.cli.test_org import spotter
from tests.factories import Studio, make_studio
from tests.petstore import PETSTORE_SPEC, Petstore

from .client import Sim, auth, send, sse
from .conftest import Platform
from .helpers import assert_requests_valid, mentions

SECRET = "sk_live_PETSTORE_e2e_5b1d_never_shown"
ORG_RULES = """
rules:
  - name: hands_off_bubbles
    condition: 'has(params.petId) && params.petId == 3'
    action: block
    message: Bubbles belongs to the studio next door.
  - name: sold_pets_need_a_yes
    condition: 'tool.operationId == "findPetsByStatus" && has(params.status) && "sold" in params.status'
    action: require_confirmation
    message: Listing sold pets shows who bought them; confirm first.
"""


@dataclass(frozen=True)
class Connected:
    pack: str
    studio: Studio
    other: Studio
    store: Petstore

    def tool(self, operation_id: str, **tool_input: object) -> dict[str, object]:
        return {"name": f"{self.pack}__{operation_id}", "input": tool_input}


@pytest.fixture
def store() -> Iterator[Petstore]:
    with Petstore(api_key=SECRET) as served:
        yield served


@pytest.fixture
async def connected(platform: Platform, pool: asyncpg.Pool, store: Petstore, tmp_path: Path) -> AsyncIterator[Connected]:
    studio, other = await make_studio(pool), await make_studio(pool)
    pack = f"pets{uuid.uuid4().hex[:6]}"
    rules = tmp_path / "rules.yaml"
    rules.write_text(ORG_RULES)
    added = await spotter(platform.env["DATABASE_URL"], "packs", "add", pack, "--spec", str(PETSTORE_SPEC),
                          "--base-url", store.base_url, "--org", studio.org.slug, "--header", f"api_key: {SECRET}",
                          "--org-rules", str(rules))
    assert added.code == 0, added.err
    assert SECRET not in added.out + added.err
    yield Connected(pack, studio, other, store)
    assert (await spotter(platform.env["DATABASE_URL"], "packs", "remove", pack)).code == 0


async def confirm(http: httpx.AsyncClient, studio: Studio, cid: str, tool_use_id: str, approved: bool):
    return await sse(http, "POST", f"/organizations/{studio.org.id}/agent/conversations/{cid}/confirm/{tool_use_id}",
                     json={"approved": approved}, headers=auth(studio.owner.user_id))


def tool_names(request: dict) -> set[str]:
    return {t["name"] for t in request["body"].get("tools", [])}


def turn_requests(requests: list[dict], words: str) -> list[dict]:
    """The agent's requests of the conversation that began with `words` (not its title's)."""
    return [r for r in requests if mentions(r, words) and r["body"].get("tools")]


async def test_the_pack_is_the_enabling_studios_and_a_read_works(http, sim: Sim, connected: Connected) -> None:
    c = connected
    await sim.script("how is pet one", {"text": "Looking.", "tool_uses": [c.tool("getPetById", petId=1)]},
                     {"text": "Rex is available.", "tool_uses": []})
    await sim.script("anything about pets", {"text": "No pet tools here.", "tool_uses": []})

    mine = await send(http, c.studio.org.id, c.studio.owner.user_id, "how is pet one?")
    theirs = await send(http, c.other.org.id, c.other.owner.user_id, "anything about pets?")

    [completed] = mine.of("tool_completed")
    assert (completed["router"], completed["action"], completed["ok"]) == (c.pack, "getPetById", True)
    assert (completed["output"]["status"], completed["output"]["body"]["name"]) == (200, "Rex")
    assert "Rex is available." in mine.text() and c.store.requests[-1].headers["api_key"] == SECRET
    requests = await sim.requests()
    ours, other = turn_requests(requests, "how is pet one"), turn_requests(requests, "anything about pets")
    assert ours and other and theirs.of("done")
    assert all(f"{c.pack}__getPetById" in tool_names(r) and f"{c.pack}__deletePet" in tool_names(r) for r in ours)
    assert not any(name.startswith(f"{c.pack}__") for r in other for name in tool_names(r))
    assert_requests_valid(ours)


async def test_a_delete_asks_first_and_runs_once(http, sim: Sim, pool: asyncpg.Pool, connected: Connected) -> None:
    c = connected
    await sim.script("remove pet two", {"text": "Removing Mittens.", "tool_uses": [c.tool("deletePet", petId=2)]},
                     {"text": "Mittens is gone.", "tool_uses": []})
    first = await send(http, c.studio.org.id, c.studio.owner.user_id, "remove pet two")
    [pending] = first.of("confirmation_pending")
    assert (pending["action"], pending["confirm"], pending["input"]) == ("deletePet", "destructive", {"petId": 2})
    assert pending["reason"] == "This will permanently delete data. Are you sure?"  # seed 002's default rules
    assert c.store.count("DELETE", "/pet/2") == 0

    approved = await confirm(http, c.studio, first.conversation_id, pending["toolUseId"], True)
    [done] = approved.of("tool_completed")
    assert done["ok"] and done["output"]["status"] == 200 and "Mittens is gone." in approved.text()
    again = await confirm(http, c.studio, first.conversation_id, pending["toolUseId"], True)
    assert again.status == 409 and again.body["error"]["code"] == "tool_already_resolved"
    assert c.store.count("DELETE", "/pet/2") == 1 and 2 not in c.store.pets
    [audit] = await pool.fetch("SELECT * FROM audit_logs WHERE metadata->>'toolUseId' = $1", pending["toolUseId"])
    assert (audit["action"], audit["metadata"]["httpStatus"], audit["metadata"]["attempts"]) == (f"{c.pack}.deletePet", 200, 1)


async def test_rules_block_one_call_and_ask_before_another(http, sim: Sim, connected: Connected) -> None:
    c = connected
    await sim.script("rename bubbles", {"text": "Trying.", "tool_uses": [c.tool("getPetById", petId=3)]},
                     {"text": "A studio rule stops me.", "tool_uses": []})
    blocked = await send(http, c.studio.org.id, c.studio.owner.user_id, "rename bubbles")
    [result] = blocked.of("tool_completed")
    assert (result["ok"], result["output"]["code"]) == (False, "blocked_by_rule")
    assert result["output"]["message"] == "Bubbles belongs to the studio next door."
    assert c.store.count("GET", "/pet/3") == 0

    await sim.script("who bought pets", {"text": "Checking sold pets.", "tool_uses": [c.tool("findPetsByStatus", status=["sold"])]},
                     {"text": "Bubbles was sold.", "tool_uses": []})
    asked = await send(http, c.studio.org.id, c.studio.owner.user_id, "who bought pets?")
    [pending] = asked.of("confirmation_pending")
    assert (pending["confirm"], pending["reason"]) == ("always", "Listing sold pets shows who bought them; confirm first.")
    assert asked.types()[-1] == "done" and c.store.count("GET", "/pet/findByStatus") == 0
    approved = await confirm(http, c.studio, asked.conversation_id, pending["toolUseId"], True)
    [listed] = approved.of("tool_completed")
    assert listed["ok"] and [p["name"] for p in listed["output"]["body"]] == ["Bubbles"]
    assert c.store.count("GET", "/pet/findByStatus") == 1


async def test_a_503_heals_and_a_422_is_the_models_to_fix(http, sim: Sim, connected: Connected) -> None:
    c = connected
    c.store.fail_next("PUT", "/pet", 503)
    await sim.script("rename rex", {"text": "Renaming.", "tool_uses": [c.tool("updatePet", body={"id": 1, "name": "Rex II", "photoUrls": []})]},
                     {"text": "Renamed after one retry.", "tool_uses": []})
    healed = await send(http, c.studio.org.id, c.studio.owner.user_id, "rename rex")
    [result] = healed.of("tool_completed")
    assert result["ok"] and (result["output"]["attempts"], result["output"]["healing"]) == (2, "2 attempts: 503 retryable, then 200")
    assert c.store.pets[1]["name"] == "Rex II" and c.store.count("PUT", "/pet") == 2

    await sim.script("add a nameless pet", {"text": "Adding.", "tool_uses": [c.tool("addPet", body={"name": " ", "photoUrls": []})]},
                     {"text": "It needs a name.", "tool_uses": []})
    refused = await send(http, c.studio.org.id, c.studio.owner.user_id, "add a nameless pet")
    [result] = refused.of("tool_completed")
    assert (result["ok"], result["output"]["code"]) == (False, "user_fixable")
    assert "422" in result["output"]["message"] and "name" in result["output"]["message"]
    # What the model read back is that same typed error.
    requests = turn_requests(await sim.requests(), "add a nameless pet")
    assert any("user_fixable" in json.dumps(r["body"]["messages"][-1]) for r in requests)


async def test_the_key_is_nowhere_to_be_seen(http, sim: Sim, pool: asyncpg.Pool, platform: Platform,
                                            connected: Connected) -> None:
    """Runs last in this module's order: whatever the other tests did, the key never left the runner."""
    c = connected
    await sim.script("pet one again", {"text": "Looking.", "tool_uses": [c.tool("getPetById", petId=1)]},
                     {"text": "Still Rex.", "tool_uses": []})
    stream = await send(http, c.studio.org.id, c.studio.owner.user_id, "pet one again")
    assert stream.of("tool_completed")[0]["ok"] and c.store.requests[-1].headers["api_key"] == SECRET
    seen = {
        "model requests": json.dumps(await sim.requests()),
        "stream": json.dumps(stream.events),
        "event log": json.dumps([dict(r) for r in await pool.fetch("SELECT type, data FROM ai_conversation_events")], default=str),
        "tool calls": json.dumps([dict(r) for r in await pool.fetch("SELECT input, output, error_message FROM ai_tool_executions")], default=str),
        "audit": json.dumps([dict(r) for r in await pool.fetch("SELECT metadata FROM audit_logs")], default=str),
        "packs table": json.dumps([dict(r) for r in await pool.fetch("SELECT spec, headers_encrypted, header_names FROM tool_packs")], default=str),
        "logs": "\n".join(line for proc in platform.procs.values() for line in proc.lines),
        "traces": json.dumps([s.attributes for s in platform.traces.spans], default=str),
    }
    assert {where: SECRET in text for where, text in seen.items()} == {where: False for where in seen}
    assert c.pack in seen["logs"]  # the runner did log about the pack: it loaded it
