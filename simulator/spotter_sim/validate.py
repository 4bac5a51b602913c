"""Request validation that reproduces the real Messages API's 400s.

Checks run roughly in the real API's order: request shape first, then
model-specific parameter rules, cache_control rules, and finally the
conversation-level rules (roles, tool_use/tool_result pairing, thinking
signatures). The first failure raises `InvalidRequest`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .conversation import content_blocks, is_gen5
from .errors import InvalidRequest
from .signing import verify_thinking
from .tokens import flatten_prompt

TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
MAX_CACHE_BREAKPOINTS = 4
THINKING_TYPES = ("enabled", "disabled", "adaptive", "between_tools")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
ROLES = ("user", "assistant", "system")  # "system" messages are text-only, mid-conversation instructions

# Fields the API accepts per block type (from the SDK's *Param types); anything
# else is rejected, which catches response-only fields echoed back by mistake.
ALLOWED_BLOCK_FIELDS: dict[str, set[str]] = {
    "text": {"type", "text", "cache_control", "citations"},
    "tool_use": {"type", "id", "name", "input", "cache_control", "caller", "toolset_name"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control", "toolset_name"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
    "image": {"type", "source", "cache_control", "transformations"},
    "document": {"type", "source", "cache_control", "citations", "context", "title"},
}
ALLOWED_TOOL_FIELDS = {
    "type", "name", "description", "input_schema", "cache_control", "allowed_callers",
    "defer_loading", "eager_input_streaming", "input_examples", "strict",
}


def validate_request(body: Any, *, thinking_secret: str, count_tokens: bool = False) -> None:
    """Raise `InvalidRequest` for anything the real API would reject with a 400.

    `count_tokens` relaxes the rules for /v1/messages/count_tokens (no max_tokens).
    """
    if not isinstance(body, dict):
        raise InvalidRequest("Input should be a valid dictionary")
    model = _check_model(body)
    if not count_tokens:
        _check_max_tokens(body)
    messages = _check_messages_shape(body)
    _check_system(body)
    _check_tools(body)
    _check_model_params(body, model)
    _check_output_config(body)
    _check_cache_control(body)
    _check_roles(messages, model, count_tokens)
    _check_tool_pairing(messages)
    _check_thinking_signatures(messages, thinking_secret)


# --- shape ---------------------------------------------------------------


def _check_model(body: dict[str, Any]) -> str:
    if "model" not in body:
        raise InvalidRequest("model: Field required")
    model = body["model"]
    if not isinstance(model, str):
        raise InvalidRequest("model: Input should be a valid string")
    if not model:
        raise InvalidRequest("model: String should have at least 1 character")
    return model


def _check_max_tokens(body: dict[str, Any]) -> None:
    if "max_tokens" not in body:
        raise InvalidRequest("max_tokens: Field required")
    value = body["max_tokens"]
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest("max_tokens: Input should be a valid integer")
    if value < 0:  # 0 is allowed: it pre-warms the cache without generating
        raise InvalidRequest("max_tokens: Input should be greater than or equal to 0")


def _check_messages_shape(body: dict[str, Any]) -> list[dict[str, Any]]:
    if "messages" not in body:
        raise InvalidRequest("messages: Field required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise InvalidRequest("messages: Input should be a valid list")
    if not messages:
        raise InvalidRequest("messages: at least one message is required")
    last = len(messages) - 1
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequest(f"messages.{i}: Input should be a valid dictionary")
        if message.get("role") not in ROLES:
            raise InvalidRequest(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'")
        for key in message:
            if key not in ("role", "content"):
                raise InvalidRequest(f"messages.{i}.{key}: Extra inputs are not permitted")
        content = message.get("content")
        if not isinstance(content, (str, list)):
            raise InvalidRequest(f"messages.{i}.content: Input should be a valid string or a valid list")
        if not content and not (i == last and message["role"] == "assistant"):
            raise InvalidRequest(
                f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
            )
        if isinstance(content, list):
            for j, block in enumerate(content):
                _check_block(block, f"messages.{i}.content.{j}", message["role"])
    return messages


def _check_block(block: Any, path: str, role: str) -> None:
    if not isinstance(block, dict):
        raise InvalidRequest(f"{path}: Input should be a valid dictionary")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise InvalidRequest(f"{path}.type: Field required")
    for key in block:
        if kind in ALLOWED_BLOCK_FIELDS and key not in ALLOWED_BLOCK_FIELDS[kind]:
            raise InvalidRequest(f"{path}.{kind}.{key}: Extra inputs are not permitted")
    if role == "system" and kind != "text":
        raise InvalidRequest(f"{path}.type: Input should be 'text'")
    if kind == "text":
        if not isinstance(block.get("text"), str):
            raise InvalidRequest(f"{path}.text.text: Field required")
        if not block["text"]:
            raise InvalidRequest("messages: text content blocks must be non-empty")
    elif kind == "tool_use":
        if role != "assistant":
            raise InvalidRequest(f"{path}: `tool_use` blocks can only appear in `assistant` messages")
        for key, expected in (("id", str), ("name", str), ("input", dict)):
            if not isinstance(block.get(key), expected):
                raise InvalidRequest(f"{path}.tool_use.{key}: Field required")
    elif kind == "tool_result":
        if role != "user":
            raise InvalidRequest(f"{path}: `tool_result` blocks can only appear in `user` messages")
        if not isinstance(block.get("tool_use_id"), str):
            raise InvalidRequest(f"{path}.tool_result.tool_use_id: Field required")
    elif kind == "thinking":
        if role != "assistant":
            raise InvalidRequest(f"{path}: `thinking` blocks can only appear in `assistant` messages")
        if not isinstance(block.get("thinking"), str):
            raise InvalidRequest(f"{path}.thinking.thinking: Field required")
        if "cache_control" in block:
            raise InvalidRequest(f"{path}.thinking.cache_control: Extra inputs are not permitted")


def _check_system(body: dict[str, Any]) -> None:
    system = body.get("system")
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise InvalidRequest("system: Input should be a valid string or a valid list")
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise InvalidRequest(f"system.{i}.type: Input should be 'text'")
        for key in block:
            if key not in ALLOWED_BLOCK_FIELDS["text"]:
                raise InvalidRequest(f"system.{i}.text.{key}: Extra inputs are not permitted")
        if not isinstance(block.get("text"), str) or not block["text"]:
            raise InvalidRequest("system: text content blocks must be non-empty")


def _check_tools(body: dict[str, Any]) -> None:
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidRequest("tools: Input should be a valid list")
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidRequest(f"tools.{i}: Input should be a valid dictionary")
        custom = tool.get("type") in (None, "custom")
        kind = "custom" if custom else str(tool.get("type"))
        name = tool.get("name")
        if not isinstance(name, str):
            raise InvalidRequest(f"tools.{i}.{kind}.name: Field required")
        if not TOOL_NAME_RE.match(name):
            raise InvalidRequest(f"tools.{i}.{kind}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        for key in tool if custom else ():
            if key not in ALLOWED_TOOL_FIELDS:
                raise InvalidRequest(f"tools.{i}.custom.{key}: Extra inputs are not permitted")
        if custom and not isinstance(tool.get("input_schema"), dict):
            raise InvalidRequest(f"tools.{i}.custom.input_schema: Field required")
        if name in seen:
            raise InvalidRequest("tools: Tool names must be unique.")
        seen.add(name)


# --- model-specific parameters --------------------------------------------


def _check_model_params(body: dict[str, Any], model: str) -> None:
    gen5 = is_gen5(model)
    for param in ("temperature", "top_p", "top_k"):
        if body.get(param) is not None and gen5:
            raise InvalidRequest(
                f"{param}: sampling parameters are not supported on {model}; remove `{param}` from the request."
            )
    temperature = body.get("temperature")
    if isinstance(temperature, (int, float)) and not 0 <= temperature <= 1:
        raise InvalidRequest("temperature: Input should be less than or equal to 1")

    tool_choice = body.get("tool_choice")
    if isinstance(tool_choice, dict):
        choice = tool_choice.get("type")
        if choice not in ("auto", "any", "tool", "none"):
            raise InvalidRequest("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
        if gen5 and choice in ("any", "tool"):
            raise InvalidRequest(
                f"tool_choice.type: '{choice}' is not supported on {model}; use 'auto' or 'none'."
            )
        parallel = tool_choice.get("disable_parallel_tool_use")
        if parallel is not None and not isinstance(parallel, bool):
            raise InvalidRequest(f"tool_choice.{choice}.disable_parallel_tool_use: Input should be a valid boolean")

    thinking = body.get("thinking")
    if thinking is None:
        return
    if not isinstance(thinking, dict) or thinking.get("type") not in THINKING_TYPES:
        raise InvalidRequest("thinking.type: Input should be 'enabled', 'disabled', 'adaptive' or 'between_tools'")
    kind = thinking["type"]
    if gen5 and kind == "disabled":
        raise InvalidRequest(
            f"thinking.type: 'disabled' is not supported on {model}; use 'between_tools' to turn thinking off."
        )
    if gen5 and (kind == "enabled" or "budget_tokens" in thinking):
        raise InvalidRequest(
            f"thinking.budget_tokens: manual thinking budgets are not supported on {model}; "
            "use thinking.type 'adaptive', or 'between_tools' to turn thinking off."
        )
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise InvalidRequest("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if isinstance(body.get("max_tokens"), int) and budget >= body["max_tokens"]:
            raise InvalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`.")


def _check_output_config(body: dict[str, Any]) -> None:
    """`output_config`: an effort level and/or a structured-output format (a JSON schema)."""
    config = body.get("output_config")
    if config is None:
        return
    if not isinstance(config, dict):
        raise InvalidRequest("output_config: Input should be a valid dictionary")
    for key in config:
        if key not in ("effort", "format"):
            raise InvalidRequest(f"output_config.{key}: Extra inputs are not permitted")
    effort = config.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise InvalidRequest("output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'")
    fmt = config.get("format")
    if fmt is None:
        return
    if not isinstance(fmt, dict):
        raise InvalidRequest("output_config.format: Input should be a valid dictionary")
    if fmt.get("type") != "json_schema":
        raise InvalidRequest("output_config.format.type: Input should be 'json_schema'")
    for key in fmt:
        if key not in ("type", "schema"):
            raise InvalidRequest(f"output_config.format.json_schema.{key}: Extra inputs are not permitted")
    if "schema" not in fmt:
        raise InvalidRequest("output_config.format.json_schema.schema: Field required")
    schema = fmt["schema"]
    if not isinstance(schema, dict):
        raise InvalidRequest("output_config.format.json_schema.schema: Input should be a valid dictionary")


# --- cache_control ----------------------------------------------------------


def _check_cache_control(body: dict[str, Any]) -> None:
    breakpoints = [b for b in flatten_prompt(body) if b.cache_control is not None]
    if len(breakpoints) > MAX_CACHE_BREAKPOINTS:
        raise InvalidRequest(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {len(breakpoints)}."
        )
    seen_5m = False
    for bp in breakpoints:
        cc = bp.cache_control or {}
        if not isinstance(cc, dict) or cc.get("type") != "ephemeral":
            raise InvalidRequest(f"{bp.cache_control_path}.type: Input should be 'ephemeral'")
        ttl = cc.get("ttl") or "5m"
        if ttl not in ("5m", "1h"):
            raise InvalidRequest(f"{bp.cache_control_path}.ttl: Input should be '5m' or '1h'")
        if ttl == "1h" and seen_5m:
            raise InvalidRequest(
                f"{bp.cache_control_path}.ttl: a ttl='1h' cache_control block must not come after a "
                "ttl='5m' cache_control block. Note that blocks are processed in the following order: "
                "`tools`, `system`, `messages`."
            )
        seen_5m = seen_5m or ttl == "5m"


# --- conversation -----------------------------------------------------------


@dataclass
class _Turn:
    """Consecutive same-role messages, merged as the real API does."""

    role: str
    blocks: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)  # (message, block, block)


def _merge_turns(messages: list[dict[str, Any]]) -> list[_Turn]:
    turns: list[_Turn] = []
    for i, message in enumerate(messages):
        if message["role"] == "system":
            continue  # system messages neither break nor join user/assistant turns
        if not turns or turns[-1].role != message["role"]:
            turns.append(_Turn(message["role"]))
        turns[-1].blocks.extend((i, j, b) for j, b in enumerate(content_blocks(message)))
    return turns


def _check_roles(messages: list[dict[str, Any]], model: str, count_tokens: bool) -> None:
    roles = [m["role"] for m in messages if m["role"] != "system"]
    if not roles or roles[0] != "user":
        raise InvalidRequest('messages: first message must use the "user" role')
    if messages[-1]["role"] == "assistant" and is_gen5(model) and not count_tokens:
        raise InvalidRequest(
            "This model does not support assistant message prefill. The conversation must end with a user message."
        )


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    turns = _merge_turns(messages)
    seen_ids: set[str] = set()
    for t, turn in enumerate(turns):
        if turn.role == "assistant":
            uses = [(i, j, b["id"]) for i, j, b in turn.blocks if b.get("type") == "tool_use"]
            for i, j, tool_id in uses:
                if tool_id in seen_ids:
                    raise InvalidRequest(f"messages.{i}.content.{j}: `tool_use` ids must be unique")
                seen_ids.add(tool_id)
            answered = _tool_result_ids(turns[t + 1]) if t + 1 < len(turns) else set()
            missing = [(i, tool_id) for i, _, tool_id in uses if tool_id not in answered]
            if missing:
                ids = ", ".join(tool_id for _, tool_id in missing)
                raise InvalidRequest(
                    f"messages.{missing[0][0]}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {ids}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message."
                )
        else:
            offered = (
                {b["id"] for _, _, b in turns[t - 1].blocks if b.get("type") == "tool_use"} if t > 0 else set()
            )
            for i, j, block in turn.blocks:
                if block.get("type") == "tool_result" and block["tool_use_id"] not in offered:
                    raise InvalidRequest(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block['tool_use_id']}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message."
                    )


def _tool_result_ids(turn: _Turn) -> set[str]:
    if turn.role != "user":
        return set()
    return {b["tool_use_id"] for _, _, b in turn.blocks if b.get("type") == "tool_result"}


def _check_thinking_signatures(messages: list[dict[str, Any]], secret: str) -> None:
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        for j, block in enumerate(content_blocks(message)):
            if block.get("type") == "thinking" and not verify_thinking(
                secret, block["thinking"], block.get("signature")
            ):
                raise InvalidRequest(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
