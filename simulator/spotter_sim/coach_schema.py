"""Structured outputs (`output_config.format` of type `json_schema`): a reply's text must be JSON that
fits the schema the request gave.

The simulator does not implement all of JSON Schema; it fills what a caller checks: every required
property is present with a value of the declared type (an enum's first value, a const, the first
branch of anyOf/oneOf, `$ref` into `$defs`/`definitions`), and properties a closed object does not
declare are left out.
"""

from __future__ import annotations

import json
from typing import Any

from .turns import Turn

_MAX_DEPTH = 12


def json_schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema a request asks its reply to follow, if it asks for one."""
    config = body.get("output_config")
    if not isinstance(config, dict):
        return None
    fmt = config.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        return fmt["schema"]
    return None


def conform_turn(body: dict[str, Any], turn: Turn) -> Turn:
    """The turn, its text made to fit the request's JSON schema when there is one (a turn that calls
    tools is left alone: the schema shapes the final text only)."""
    schema = json_schema_of(body)
    if schema is None or turn.tool_uses:
        return turn
    try:
        value = json.loads(turn.text or "")
    except ValueError:
        value = None
    fitted = conform(value, schema) if value is not None else instance(schema)
    return turn.model_copy(update={"text": json.dumps(fitted, ensure_ascii=False)})


def conform(value: Any, schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """`value` with whatever the schema requires and it lacks filled in (objects, recursively)."""
    root = root if root is not None else schema
    schema = _resolve(schema, root)
    if depth > _MAX_DEPTH:
        return value
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and branches:
        for branch in branches:
            if _type_fits(value, _resolve(branch, root)):
                return conform(value, branch, root, depth + 1)
        return instance(branches[0], root, depth + 1)
    if not _type_fits(value, schema):
        return instance(schema, root, depth + 1)
    if isinstance(value, dict):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        out = dict(value)
        if schema.get("additionalProperties") is False:
            out = {k: v for k, v in out.items() if k in properties}
        for key, sub in properties.items():
            if key in out and isinstance(sub, dict):
                out[key] = conform(out[key], sub, root, depth + 1)
        for key in schema.get("required") or []:
            if key not in out:
                sub = properties.get(key)
                out[key] = instance(sub, root, depth + 1) if isinstance(sub, dict) else ""
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [conform(item, schema["items"], root, depth + 1) for item in value]
    return value


def instance(schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A small value the schema accepts."""
    root = root if root is not None else schema
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    branches = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
    if isinstance(branches, list) and branches and isinstance(branches[0], dict):
        return instance(branches[0], root, depth + 1)
    kind = _types(schema)
    if depth > _MAX_DEPTH:
        return None if "null" in kind else ""
    first = next((k for k in kind if k != "null"), "null")
    if first == "object" or (not kind and isinstance(schema.get("properties"), dict)):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        return {key: instance(properties.get(key) or {}, root, depth + 1) for key in schema.get("required") or []}
    if first == "array":
        count = schema.get("minItems") or 0
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        return [instance(items, root, depth + 1) for _ in range(count)]
    if first == "string":
        return "x" * (schema.get("minLength") or 0)
    if first == "integer":
        return int(schema.get("minimum") or 0)
    if first == "number":
        return schema.get("minimum") or 0
    if first == "boolean":
        return False
    if first == "null":
        return None
    return ""


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def _type_fits(value: Any, schema: dict[str, Any]) -> bool:
    kinds = _types(schema)
    if not kinds:
        return True
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
    }
    return any(checks.get(k, lambda v: True)(value) for k in kinds)


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while isinstance(schema.get("$ref"), str) and seen < _MAX_DEPTH:
        ref = schema["$ref"]
        target: Any = root
        if ref.startswith("#"):
            for part in ref.lstrip("#").strip("/").split("/"):
                if part and isinstance(target, dict):
                    target = target.get(part.replace("~1", "/").replace("~0", "~"))
        schema = target if isinstance(target, dict) else {}
        seen += 1
    return schema
