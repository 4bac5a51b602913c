"""The LangGraph peer's agent for `make bench`: a ReAct loop (model -> tools -> model …) with one read
tool, `who_am_i`, which returns a fixed profile (who_am_i.json, the demo owner's context in the shape
Spotter's get_current_context returns). Loaded by `langgraph dev` (langgraph.json: "peer_agent:graph")
inside the peer's own virtual environment; bench/peers/langgraph_peer.py starts it.

The model is ChatAnthropic pointed at Spotter's model simulator (ANTHROPIC_BASE_URL, a dummy key),
asked the way Spotter's orchestrator asks: same model, max_tokens, thinking between tools, streamed,
no client-side retries (SPOTTER_PROVIDER_RETRIES=0 in Spotter's bench)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

_PROFILE: dict[str, Any] = json.loads((Path(__file__).with_name("who_am_i.json")).read_text(encoding="utf-8"))

SYSTEM = (
    "You are the studio assistant of a fitness-studio management product. Staff chat with you. "
    "Use the who_am_i tool to find out who the caller is and where they work; answer briefly."
)


@tool
def who_am_i() -> dict[str, Any]:
    """Who and where the caller is: the organization, the caller's identity and role, the reply locale, and the current date, time and weekday in the studio's timezone."""  # noqa: E501
    return _PROFILE


TOOLS = [who_am_i]

# Built once, at import: the client (and its TLS context) is not created inside the event loop per call.
_model = ChatAnthropic(
    model=os.environ.get("PEER_MODEL", "claude-sonnet-5-5"),
    max_tokens=int(os.environ.get("PEER_MAX_TOKENS", "4096")),
    thinking={"type": "between_tools"},  # what Spotter's orchestrator sends to 5.x models
    streaming=True,
    max_retries=0,
    base_url=os.environ["ANTHROPIC_BASE_URL"],
    api_key=os.environ.get("ANTHROPIC_API_KEY", "sk-ant-simulator"),
).bind_tools(TOOLS)


async def call_model(state: MessagesState) -> dict[str, Any]:
    reply = await _model.ainvoke([SystemMessage(SYSTEM), *state["messages"]])
    return {"messages": [reply]}


def _build() -> Any:
    g = StateGraph(MessagesState)
    g.add_node("agent", call_model)
    g.add_node("tools", ToolNode(TOOLS))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    g.add_edge("tools", "agent")
    return g.compile()


graph = _build()
