"""`spotter packs`: a pack from an OpenAPI document, registered and enabled per organization, its
header values encrypted and never shown; every refusal a message, exit code 2 and no change."""

from __future__ import annotations

import uuid
from pathlib import Path

import asyncpg
import pytest

from spotter_shared.secrets import SecretSettings, cipher, unseal
from tests.factories import make_studio

from .test_org import spotter

DOORS = Path(__file__).parents[1] / "tool_runner" / "data" / "doors.yaml"
SECRET = "sk_live_DOORS_4242_do_not_leak"


async def _packs(pool: asyncpg.Pool) -> int:
    return await pool.fetchval("SELECT count(*) FROM tool_packs")


async def test_add_list_and_remove_a_pack(db_url: str, pool: asyncpg.Pool, tmp_path: Path) -> None:
    studio, other = await make_studio(pool), await make_studio(pool)
    name = f"doors_{uuid.uuid4().hex[:6]}"
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: no_unlock_at_night\n    condition: 'tool.name.matches(\"unlock\")'\n    action: block\n")
    run = await spotter(db_url, "packs", "add", name, "--spec", str(DOORS), "--base-url", "http://doors.local/api/",
                        "--org", studio.org.slug, "--header", f"X-Api-Key: {SECRET}", "--rules", str(rules))
    assert run.code == 0, run.err
    assert "6 tools, enabled for 1 organization(s)" in run.err and SECRET not in run.out + run.err
    row = await pool.fetchrow("SELECT * FROM tool_packs WHERE name = $1", name)
    assert (row["base_url"], row["operations"], row["header_names"], row["title"]) == ("http://doors.local/api", 6, ["X-Api-Key"], "Door access")
    assert SECRET not in row["headers_encrypted"] and unseal(row["headers_encrypted"], cipher(SecretSettings())) == {"X-Api-Key": SECRET}
    enabled = await pool.fetch("SELECT organization_id FROM tool_pack_organizations WHERE pack_id = $1", row["id"])
    assert [str(r["organization_id"]) for r in enabled] == [studio.org.id]

    listed = await spotter(db_url, "packs", "list")
    line = next(line for line in listed.out.splitlines() if line.startswith(name))
    assert "X-Api-Key" in line and studio.org.slug in line and other.org.slug not in line and SECRET not in listed.out

    again = await spotter(db_url, "packs", "add", name, "--spec", str(DOORS), "--base-url", "https://doors.example",
                          "--org", other.org.id)
    assert again.code == 0, again.err
    assert await pool.fetchval("SELECT count(*) FROM tool_pack_organizations po JOIN tool_packs p ON p.id = po.pack_id WHERE p.name = $1", name) == 2
    assert await pool.fetchval("SELECT headers_encrypted FROM tool_packs WHERE name = $1", name) is None  # replaced

    assert (await spotter(db_url, "packs", "remove", name)).code == 0
    assert await pool.fetchval("SELECT count(*) FROM tool_packs WHERE name = $1", name) == 0
    gone = await spotter(db_url, "packs", "remove", name)
    assert gone.code == 2 and "no pack named" in gone.err


@pytest.mark.parametrize(("args", "message"), [
    (["Bad-Name", "--spec", "{doors}", "--base-url", "http://x"], "NAME: lowercase letters"),
    (["door__s", "--spec", "{doors}", "--base-url", "http://x"], "NAME: lowercase letters"),  # tool names split at __
    (["tasks", "--spec", "{doors}", "--base-url", "http://x"], "one of Spotter's own routers"),
    (["p1", "--spec", "/nope.yaml", "--base-url", "http://x"], "no such file"),
    (["p1", "--spec", "{broken}", "--base-url", "http://x"], "--spec"),
    (["p1", "--spec", "{doors}", "--base-url", "ftp://x"], "is not an http(s) URL"),
    (["p1", "--spec", "{doors}", "--base-url", "http://x", "--header", "no colon here"], '--header must be "Name: value"'),
    (["p1", "--spec", "{doors}", "--base-url", "http://x", "--rules", "{bad_rules}"], "line 2: rule a: the condition does not parse"),
    (["p1", "--spec", "{doors}", "--base-url", "http://x", "--org", "no-such-studio"], "no organization"),
])
async def test_bad_input_is_refused_and_changes_nothing(db_url: str, pool: asyncpg.Pool, tmp_path: Path, args: list[str],
                                                        message: str) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(DOORS.read_text().replace('responses: {"204": {description: gone}}', "responses: 7"))
    bad_rules = tmp_path / "rules.yaml"
    bad_rules.write_text("rules:\n  - name: a\n    condition: 'tool.name ==== 1'\n    action: block\n")
    args = [a.format(doors=DOORS, broken=broken, bad_rules=bad_rules) for a in args]
    before = await _packs(pool)
    run = await spotter(db_url, "packs", "add", *args)
    assert run.code == 2 and message in run.err, run.err
    assert await _packs(pool) == before


async def test_production_refuses_to_store_secrets_without_a_key(db_url: str, pool: asyncpg.Pool) -> None:
    import os

    from .test_org import SPOTTER

    proc = await __import__("asyncio").create_subprocess_exec(
        SPOTTER, "packs", "add", "p2", "--spec", str(DOORS), "--base-url", "http://x", "--header", "X-Key: v",
        env={**os.environ, "DATABASE_URL": db_url, "SPOTTER_ENV": "production", "SPOTTER_JWT_SECRET": "x" * 40,
             "SPOTTER_PACK_SECRET_KEY": ""},
        stdout=-1, stderr=-1)
    _, err = await proc.communicate()
    assert proc.returncode == 2 and b"SPOTTER_PACK_SECRET_KEY must be set in production" in err
    assert await pool.fetchval("SELECT count(*) FROM tool_packs WHERE name = 'p2'") == 0
