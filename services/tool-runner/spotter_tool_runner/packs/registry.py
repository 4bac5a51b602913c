"""The tool packs of every organization, as the tool-runner serves them: loaded from the tables that
`spotter packs` writes, reloaded at run time without a restart. The command notifies the
`spotter_packs` channel in the transaction that changes a pack; every runner replica listens,
reloads on its next use, and tells the orchestrators their cached catalogs are stale. Should a
notification be missed (the listening connection dropped), a snapshot older than `ttl_s` is reloaded
anyway.

A pack that can no longer be loaded (its document or rules became invalid, its headers cannot be
decrypted with this replica's key, its name is one of Spotter's own routers) is left out and logged;
it never takes the others, or the runner, down with it. Without rules of its own a pack gets seed
002's rule set (packs/seed002_rules.yaml); an organization's rules come after the pack's."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Final

import asyncpg
import httpx
from jsonschema import Draft202012Validator

from spotter_shared.packs import CHANGED_CHANNEL
from spotter_shared.packs.openapi import InvalidSpec, load_spec, operations
from spotter_shared.packs.rules import Rule, RuleError, load_rules
from spotter_shared.secrets import SecretError, cipher, unseal
from spotter_shared.telemetry import event

from .tool import Pack, PackTool

log = logging.getLogger(__name__)

DEFAULT_RULES: Final = resources.files("spotter_shared.packs").joinpath("seed002_rules.yaml").read_text("utf-8")

_LOAD = """
SELECT p.id, p.name, p.title, p.spec, p.base_url, p.headers_encrypted, p.rules_yaml, p.updated_at,
       po.organization_id, po.rules_yaml AS org_rules
  FROM tool_packs p LEFT JOIN tool_pack_organizations po ON po.pack_id = p.id
 ORDER BY p.name, po.organization_id
"""


@dataclass(frozen=True)
class _Loaded:
    version: Any
    pack: Pack
    tools: tuple[PackTool, ...]


class PackRegistry:
    def __init__(self, pool: asyncpg.Pool, client: httpx.AsyncClient, *, reserved: Iterable[str], ttl_s: float = 30.0,
                 on_change: Callable[[list[str]], Awaitable[None]] | None = None) -> None:
        self._pool = pool
        self._client = client
        self._reserved = frozenset(reserved)
        self._ttl_s = ttl_s
        self._on_change = on_change
        self._lock = asyncio.Lock()
        self._loaded_at = float("-inf")
        self._packs: dict[str, _Loaded] = {}
        self._by_org: dict[str, dict[str, PackTool]] = {}
        self._org_rules: dict[str, tuple[Rule, ...] | None] = {}  # rules text → parsed (None: refused)
        self._listener: asyncpg.Connection | None = None

    async def start(self) -> None:
        """Listen for the command's notifications on a connection of the pool's own."""
        self._listener = await self._pool.acquire()
        await self._listener.add_listener(CHANGED_CHANNEL, self._notified)

    async def stop(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            try:
                await listener.remove_listener(CHANGED_CHANNEL, self._notified)
            finally:
                await self._pool.release(listener)

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._loaded_at = float("-inf")
        event(log, "agent.packs.changed", pack=payload)
        if self._on_change is not None:
            asyncio.get_running_loop().create_task(self._announce())

    async def _announce(self) -> None:
        assert self._on_change is not None
        try:
            await self._on_change(sorted(self._packs))
        except Exception as exc:  # noqa: BLE001 — the orchestrators' caches expire on their own
            log.warning("could not announce the packs' change: %r", exc)

    async def tools(self, organization_id: str) -> dict[str, PackTool]:
        """The organization's pack tools by wire name, in a stable order (pack, then document order)."""
        if time.monotonic() - self._loaded_at > self._ttl_s:
            async with self._lock:
                if time.monotonic() - self._loaded_at > self._ttl_s:
                    await self._reload()
        return self._by_org.get(organization_id, {})

    async def get(self, organization_id: str, router: str, action: str) -> PackTool | None:
        return (await self.tools(organization_id)).get(f"{router}__{action}")

    async def _reload(self) -> None:
        started = time.monotonic()
        rows = await self._pool.fetch(_LOAD)
        packs: dict[str, _Loaded | None] = {}  # None: refused (logged once per reload)
        by_org: dict[str, dict[str, PackTool]] = {}
        for row in rows:
            name = row["name"]
            if name not in packs:
                packs[name] = self._pack(row)
            loaded = packs[name]
            if loaded is None or row["organization_id"] is None:
                continue
            org_rules = self._rules_of_org(name, row["org_rules"])
            if org_rules is None:
                continue  # rules that cannot be read constrain nothing: the pack stays off for that org
            tools = by_org.setdefault(str(row["organization_id"]), {})
            for tool in loaded.tools:
                tools[tool.name] = replace(tool, org_rules=org_rules) if org_rules else tool
        self._packs = {name: loaded for name, loaded in packs.items() if loaded is not None}
        self._by_org = by_org
        self._loaded_at = started

    def _pack(self, row: asyncpg.Record) -> _Loaded | None:
        name, version = row["name"], (row["id"], row["updated_at"])
        if (known := self._packs.get(name)) is not None and known.version == version:
            return known
        if name in self._reserved:
            return _refused(name, "its name is one of Spotter's own routers")
        try:
            spec = load_spec(row["spec"])
            ops = operations(name, spec)
            rules = tuple(load_rules(row["rules_yaml"] or DEFAULT_RULES, source=f"{name} rules"))
            headers = unseal(row["headers_encrypted"], cipher()) if row["headers_encrypted"] else {}
        except (InvalidSpec, RuleError, SecretError, ValueError) as exc:
            return _refused(name, str(exc))
        pack = Pack(name=name, title=str(row["title"] or name), base_url=row["base_url"], headers=headers, rules=rules)
        reads = {op.path: op for op in ops if op.method == "get"}
        tools = tuple(
            PackTool(pack=pack, op=op, validator=Draft202012Validator(op.input_schema, format_checker=Draft202012Validator.FORMAT_CHECKER), client=self._client,
                     refresh=reads.get(op.path) if op.side_effects == "write" else None)
            for op in ops
        )
        event(log, "agent.packs.loaded", pack=name, tools=len(tools), rules=len(rules))
        return _Loaded(version=version, pack=pack, tools=tools)

    def _rules_of_org(self, pack: str, text: str | None) -> tuple[Rule, ...] | None:
        if not text:
            return ()
        if text not in self._org_rules:
            try:
                self._org_rules[text] = tuple(load_rules(text, source=f"{pack} organization rules"))
            except RuleError as exc:
                log.error("pack %s left out for an organization: %s", pack, exc)
                self._org_rules[text] = None
        return self._org_rules[text]


def _refused(name: str, why: str) -> None:
    log.error("pack %s left out: %s", name, why)
    return None
