"""One operation of a tool pack as a tool the runner executes like its own (seed 002): the same role
check, input re-validation (against the operation's JSON schema, by jsonschema's 2020-12 validator),
at-most-once execution and audit rows for writes. Before the call the pack's constraint rules are
asked (`verdict`); the call itself goes over HTTP with healing (calls.py), and its outcome says how
many attempts it took and why. A failure the healing could not fix is a typed error with guidance."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from spotter_shared.contracts.commands import Actor
from spotter_shared.packs.openapi import Operation
from spotter_shared.packs.rules import Rule, Verdict, evaluate

from ..context import ToolContext
from ..declaration import STAFF, Audit, SideEffects, ToolFailure
from .calls import PackResult, call_operation

MAX_ERROR_CHARS: Final = 1500


@dataclass(frozen=True)
class Pack:
    """A loaded pack: its operations' tools, where they are served, and the credentials they send."""

    name: str
    title: str
    base_url: str
    headers: Mapping[str, str] = field(repr=False)  # decrypted: never logged, never shown
    rules: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class PackTool:
    """Quacks like a ToolDecl where the runner needs one (name, roles, side effects, confirm, audit,
    inverse, kind, validation); its handler is the HTTP call."""

    pack: Pack
    op: Operation
    validator: Validator = field(repr=False)
    client: httpx.AsyncClient = field(repr=False, compare=False)
    org_rules: tuple[Rule, ...] = ()
    refresh: Operation | None = None  # a GET of the same path, read again before a conflict is retried

    roles: frozenset[str] = STAFF
    inverse: None = None
    kind: str = "normal"

    @property
    def router(self) -> str:
        return self.pack.name

    @property
    def action(self) -> str:
        return self.op.tool_name.split("__", 1)[1]

    @property
    def name(self) -> str:
        return self.op.tool_name

    @property
    def summary(self) -> str:
        return f"[{self.pack.title}] {self.op.summary}"

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.op.input_schema

    @property
    def side_effects(self) -> SideEffects:
        return self.op.side_effects

    @property
    def confirm(self) -> str:
        return self.op.confirm

    @property
    def audit(self) -> Audit | None:
        if self.side_effects != "write":
            return None
        return Audit(resource=self.pack.name, action_label=f"{self.pack.name}.{self.action}")

    def validate(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The model's input, checked against the operation's schema; a refusal names the field."""
        errors = sorted(self.validator.iter_errors(dict(raw)), key=lambda e: list(e.absolute_path))
        if errors:
            problems = []
            for error in errors[:5]:
                where = ".".join(str(p) for p in error.absolute_path) or "input"
                problems.append(f"{where}: {error.message}")
            first = best_match(errors)
            raise ToolFailure(
                "invalid_input", f"Invalid input for {self.name}: " + "; ".join(problems),
                hint=f"Fix {'.'.join(str(p) for p in first.absolute_path) or 'the input'} and call {self.name} again. "
                f"Accepted fields: {', '.join(self.input_schema.get('properties', {})) or 'none'}.",
            )
        return dict(raw)

    def verdict(self, args: Mapping[str, Any], actor: Actor, conversation_id: str, cost_usd_micros: int | None) -> Verdict:
        """What the pack's rules, then the organization's, say about this call."""
        facts = {"name": self.name, "pack": self.pack.name, "operationId": self.op.operation_id,
                 "method": self.op.method.upper(), "path": self.op.path, "mutates": self.side_effects == "write",
                 "confirm": self.confirm}
        context = {"role": actor.role, "organizationId": actor.organization_id, "userId": actor.user_id,
                   "conversationId": conversation_id,
                   "conversationCostUsd": (cost_usd_micros or 0) / 1_000_000}
        return evaluate((*self.pack.rules, *self.org_rules), tool=facts, params=args, context=context)

    async def __call__(self, ctx: ToolContext, args: Mapping[str, Any], warnings: Sequence[str] = ()) -> dict[str, Any]:
        refresh = None
        if self.refresh is not None:
            sibling = self.refresh

            async def refresh() -> None:
                await call_operation(self.client, sibling, self.pack.base_url, _path_args(sibling, args),
                                     self.pack.headers)

        result = await call_operation(
            self.client, self.op, self.pack.base_url, args, self.pack.headers,
            idempotency_key=f"{ctx.conversation_id}:{ctx.tool_use_id}", refresh=refresh,
        )
        if not result.ok:
            raise self._failure(result)
        healed = result.healed
        out: dict[str, Any] = {"status": result.status, "body": result.body, "attempts": len(healed.attempts)}
        if healed.healed:
            out["healing"] = healed.summary()
        if warnings:
            out["warnings"] = list(warnings)
        return out

    def _failure(self, result: PackResult) -> ToolFailure:
        healed = result.healed
        said = result.body if isinstance(result.body, str) else json.dumps(result.body, ensure_ascii=False)
        answer = f"answered {result.status}" if result.status is not None else "could not be reached"
        message = f"{self.pack.title} {answer} to {self.op.operation_id} ({healed.summary()})"
        if said and said != "null":
            message += f": {said[:MAX_ERROR_CHARS]}"
        return ToolFailure(healed.classified.category, message, hint=healed.classified.guidance)


def _path_args(op: Operation, args: Mapping[str, Any]) -> dict[str, Any]:
    keys = {p.key for p in op.parameters if p.location == "path"}
    return {k: v for k, v in args.items() if k in keys}
