"""The summary model's two jobs (seed 000 "Compaction"): compacting a long conversation at the
start of a send turn, and titling a conversation after its first exchange.

Both are best effort and neither may hurt the turn: a call the budget refuses is not made, a call
that fails or overruns its time budget (3 s for a summary, 1.5 s for a title) is dropped, and the
turn goes on uncompacted or keeps its first-line title. Each call is reserved before and settled
after through billing like every model call, so the org's daily spend and the conversation's
lifetime totals include it; it is not part of the turn's own usage in `done`, which describes the
agent's calls (and their cache ratio).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Literal

from spotter_shared import telemetry
from spotter_shared.contracts.billing import SettleUsage
from spotter_shared.contracts.commands import Actor, SendMessage
from spotter_shared.errors import RemoteError

from .calls import text_of
from .compaction import (
    SUMMARY_PROMPT, TITLE_PROMPT, clean_title, plan_compaction, summary_content, summary_prompt, title_prompt,
)
from .loop import estimate_tokens
from .model import ModelClient, ModelReply, ProviderError
from .peers import Peers
from .settings import OrchestratorSettings
from .store import StoredMessage, Store, fallback_title, primary_language

log = logging.getLogger(__name__)

Purpose = Literal["summary", "title"]
SUMMARY_MAX_TOKENS = 1024
TITLE_MAX_TOKENS = 40


@dataclass(frozen=True)
class Job:
    """Who a summary-model call is for: billing charges the organization and the conversation."""

    actor: Actor
    conversation_id: str
    trace_id: str
    turn_id: str


class Summaries:
    def __init__(self, settings: OrchestratorSettings, store: Store, peers: Peers, model: ModelClient) -> None:
        self._settings = settings
        self._store = store
        self._peers = peers
        self._model = model
        self._embedding: dict[str, asyncio.Task[None]] = {}  # by turn id: a summary's embedding, beside its turn

    def due(self, stored: list[StoredMessage]) -> bool:
        """Whether this replay is long enough to compact (compact() then does it)."""
        return plan_compaction(stored, at=self._settings.spotter_compact_at, keep=self._settings.spotter_compact_keep) is not None

    async def compact(self, cmd: SendMessage, stored: list[StoredMessage]) -> list[StoredMessage]:
        """Compact when the replay is long enough; the replay to use either way."""
        plan = plan_compaction(stored, at=self._settings.spotter_compact_at, keep=self._settings.spotter_compact_keep)
        if plan is None:
            return stored
        locale = (await self._store.conversation(cmd.conversation_id)).locale
        job = Job(cmd.actor, cmd.conversation_id, cmd.trace_id, cmd.turn_id)
        summary = await self._ask(job, "summary", SUMMARY_PROMPT, summary_prompt(locale, plan.previous_summary, plan.summarized),
                                  max_tokens=SUMMARY_MAX_TOKENS, budget_s=self._settings.spotter_summary_budget_s)
        if summary is None:
            return stored  # logged as agent.compaction.failed; this turn runs uncompacted
        await self._store.add_summary(cmd.conversation_id, cmd.turn_id, summary_content(summary), summary=summary,
                                      through_message_id=plan.through_id)
        telemetry.event(log, "agent.compaction.completed", summarized=len(plan.summarized), kept=len(plan.kept),
                        traceId=cmd.trace_id)
        # Its embedding is for finding this conversation later, not for this turn: made beside the turn's
        # model call instead of before it, and awaited once the turn is over (`embedded`).
        self._embedding[cmd.turn_id] = asyncio.ensure_future(self._embed(job, summary))
        return await self._store.messages(cmd.conversation_id)

    async def embedded(self, turn_id: str) -> None:
        """Once a turn is over: the embedding of the summary it made, stored or given up (best effort)."""
        task = self._embedding.pop(turn_id, None)
        if task is None:
            return
        try:
            await task
        except Exception:  # noqa: BLE001 — conversation search falls back to the summary's words
            log.warning("could not store a summary's embedding", exc_info=True)

    async def title(self, cmd: SendMessage, reply: str | None = None) -> None:
        """After the first exchange: a short title in the user's language, replacing the first line.
        `reply`: the text of the turn's replies when the caller made them all (the turn's first attempt);
        the conversation's language is then the one its creation stored (the caller's, `begin_turn`).
        Otherwise both are read."""
        if reply is None:
            stored = await self._store.messages(cmd.conversation_id)
            reply = " ".join(text_of(m.content) for m in stored if m.role == "assistant" and m.turn_id == cmd.turn_id)
            locale = (await self._store.conversation(cmd.conversation_id)).locale
        else:
            locale = primary_language(cmd.actor.locale)
        job = Job(cmd.actor, cmd.conversation_id, cmd.trace_id, cmd.turn_id)
        answer = await self._ask(job, "title", TITLE_PROMPT, title_prompt(locale, cmd.message, reply.strip()),
                                 max_tokens=TITLE_MAX_TOKENS, budget_s=self._settings.spotter_title_budget_s)
        title = clean_title(answer) if answer else None
        if title is None:
            return
        if await self._store.set_title(cmd.conversation_id, title, replacing=fallback_title(cmd.message)):
            telemetry.event(log, "agent.title.generated", traceId=cmd.trace_id, chars=len(title))

    async def _ask(self, job: Job, purpose: Purpose, system: str, prompt: str, *, max_tokens: int, budget_s: float) -> str | None:
        """One call of the summary model within budget (money and time); its text, or None."""
        model = self._settings.spotter_summary_model
        params = {"model": model, "max_tokens": max_tokens, "system": system,
                  "messages": [{"role": "user", "content": prompt}]}
        event = "agent.compaction.failed" if purpose == "summary" else "agent.title.failed"
        try:
            # One summary and one title per turn: the purpose names the call.
            reservation_id, held = await self._peers.reserve_call(
                job.turn_id, purpose, organization_id=job.actor.organization_id, model=model,
                input_tokens=estimate_tokens(params), max_output_tokens=max_tokens, trace_id=job.trace_id,
            )
        except (TimeoutError, RemoteError) as exc:
            # Fail closed on money: no reservation, no call.
            telemetry.event(log, event, reason="billing_unavailable", error=type(exc).__name__, traceId=job.trace_id)
            return None
        if not held.ok:
            telemetry.event(log, event, reason="budget", traceId=job.trace_id)
            return None
        reply: ModelReply | None = None
        try:
            async with asyncio.timeout(budget_s):
                reply = await self._model.create(params)
        except TimeoutError:
            telemetry.event(log, event, reason="timeout", budgetS=budget_s, traceId=job.trace_id)
        except ProviderError as exc:
            telemetry.event(log, event, reason="provider", errorCode=exc.code, traceId=job.trace_id)
        finally:
            # Always settled: the real usage, or a release when nothing came back (also on cancel).
            await asyncio.shield(self._settle(job, reservation_id, model, reply))
        text = text_of(reply.content).strip() if reply is not None else ""
        if reply is not None and not text:
            telemetry.event(log, event, reason="empty", traceId=job.trace_id)
        return text or None

    async def _settle(self, job: Job, reservation_id: str, model: str, reply: ModelReply | None) -> None:
        usage = reply.usage if reply is not None else None
        try:
            await self._peers.settle(SettleUsage(
                reservation_id=reservation_id, organization_id=job.actor.organization_id, user_id=job.actor.user_id,
                conversation_id=job.conversation_id, model=model, usage=usage,
            ), job.trace_id)
        except (TimeoutError, RemoteError):
            # The hold expires on its own; the turn must not fail over a side task's bookkeeping.
            log.warning("could not settle the %s reservation %s", model, reservation_id, exc_info=True)

    async def _embed(self, job: Job, summary: str) -> None:
        result = await self._peers.embed_passage(summary, job.trace_id, self._settings.spotter_embed_timeout_s)
        if result is None or not result.vectors:
            return
        await self._store.set_summary_embedding(job.conversation_id, summary, result.vectors[0], result.model)

