"""A conversation with the demo policy over the real tool catalog, for unit tests of `demo.respond`.

Every call the policy makes must be offered by the request and valid input for the real tool (its
declared input model), and every tool result fed back is a real tool output model dumped as the
tool-runner sends it (camelCase JSON) — so the demo cannot drift from the tools it drives.
"""

from __future__ import annotations

import json
import uuid
from datetime import date
from itertools import count
from typing import Any

from pydantic import BaseModel

from spotter_sim.demo import respond
from spotter_sim.turns import Turn
from spotter_tool_runner.tools import REGISTRY, read

from .helpers import MODEL

DECLARATIONS = {d.name: d for d in REGISTRY}


def catalog(role: str) -> list[dict[str, Any]]:
    """The tools array the orchestrator sends for `role`."""
    return [{"name": s.name, "description": s.summary, "input_schema": s.input_schema} for s in REGISTRY.for_role(role)]


OWNER = catalog("owner")
COACH = catalog("coach")


def without(tools: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    return [t for t in tools if t["name"] not in names]


class Chat:
    def __init__(self, text: str | list[dict[str, Any]], tools: list[dict[str, Any]] = OWNER) -> None:
        self.tools = tools
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
        self.turn: Turn | None = None
        self._ids = count(1)

    def step(self) -> Turn:
        body = {"model": MODEL, "max_tokens": 300, "messages": self.messages, "tools": self.tools}
        self.turn = respond(body)
        offered = {t["name"] for t in self.tools}
        for use in self.turn.tool_uses:
            assert use.name in offered, f"{use.name} is not offered"
            DECLARATIONS[use.name].input.model_validate(use.input)
        return self.turn

    def call(self) -> tuple[str, dict[str, Any]]:
        """The one tool call the policy makes next."""
        turn = self.step()
        assert len(turn.tool_uses) == 1, turn.text
        return turn.tool_uses[0].name, turn.tool_uses[0].input

    def text(self) -> str:
        """The policy's plain answer (no tool call)."""
        turn = self.step()
        assert not turn.tool_uses, turn.tool_uses
        assert turn.text
        return turn.text

    def answer(self, output: BaseModel | dict[str, Any], *, is_error: bool = False) -> None:
        """Record the assistant's calls and give each this result."""
        assert self.turn is not None and self.turn.tool_uses
        ids = [f"toolu_{next(self._ids)}" for _ in self.turn.tool_uses]
        said = [{"type": "text", "text": self.turn.text}] if self.turn.text else []
        self.messages.append({"role": "assistant", "content": said + [
            {"type": "tool_use", "id": i, "name": u.name, "input": u.input} for i, u in zip(ids, self.turn.tool_uses)]})
        content = json.dumps(output.model_dump(mode="json") if isinstance(output, BaseModel) else output)
        self.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": content} | ({"is_error": True} if is_error else {})
            for i in ids]})


def uid(n: int) -> uuid.UUID:
    return uuid.UUID(int=n)


# The demo studio, as its tools describe it. "Now" is far from the machine's today on purpose: every
# date the policy sends must come from get_current_context.
NOW = "2031-02-05T09:30:00+02:00"  # a Wednesday
OWNER_ID, SAAR_COHEN, SAAR_LEVI, DANI, DANIEL = uid(1), uid(2), uid(3), uid(4), uid(5)


def context(now: str = NOW, weekday: str = "Wednesday") -> read.CurrentContext:
    return read.CurrentContext(
        organization=read.OrganizationInfo(id=uid(100), name="Demo Gym", tier="pro", locale="en", timezone="Asia/Jerusalem"),
        caller=read.CallerInfo(user_id=uid(101), membership_id=OWNER_ID, name="Noa Owner", email="noa@demo.gym", role="owner"),
        locale="en", now=now, weekday=weekday,
    )


def member(membership_id: uuid.UUID, name: str, plan: str | None, payment: str) -> read.MemberSummary:
    email = name.lower().replace(" ", ".") + "@demo.gym"
    return read.MemberSummary(membership_id=membership_id, name=name, email=email, role="member", status="active",
                              plan=plan, payment_status=payment)


def members(*found: read.MemberSummary) -> read.MembersSearchResult:
    return read.MembersSearchResult(members=list(found), total=len(found))


SAARS = members(member(SAAR_COHEN, "Saar Cohen", "Unlimited", "paid"), member(SAAR_LEVI, "Saar Levi", "3x/week", "overdue"))
DANIS = members(member(DANI, "Dani Rubin", "Personal training", "due"), member(DANIEL, "Daniel Katz", "Unlimited", "paid"))


def detail(membership_id: uuid.UUID, name: str, plan: str, payment: str, days: int) -> read.MemberDetail:
    return read.MemberDetail(
        membership_id=membership_id, user_id=uid(membership_id.int + 1000), name=name, email=f"{name.split()[0].lower()}@demo.gym",
        phone=None, role="member", status="active", plan=plan, payment_status=payment, joined_at=date(2030, 3, 1),
        last_visit_at=None, days_since_last_visit=days,
    )


def picked(picked_id: uuid.UUID, label: str, kind: str = "member") -> dict[str, Any]:
    """What the app returns for read__ask_user_to_pick once the user picks."""
    return {"pickedId": str(picked_id), "pickedLabel": label, "kind": kind}
