"""Seed 002 §2.1: the tools of a pack, generated from an OpenAPI 3 document. The document is parsed
and validated by openapi-spec-validator (an invalid one is refused with the validator's message);
`$ref`s are resolved by jsonschema-path while the schemas are built. Each operation becomes one tool,
`{pack}__{operationId}` made to fit the API's tool-name rules and unique, whose input schema holds
its path, query and header parameters and its JSON (or URL-encoded form) body, with the document's
enums, formats and required fields (an operation whose required body is neither — a file upload — has
no tool); the summary (or description) is the tool's summary, and the method decides its side
effects and, with the operation's words, its default confirmation."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import yaml
from jsonschema_path import SchemaPath
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

METHODS: Final = ("get", "put", "post", "delete", "patch", "head", "options")
READS: Final = frozenset({"get", "head", "options"})
IDEMPOTENT: Final = frozenset({"get", "head", "options", "put", "delete"})
# Operations whose effect reaches people or money: always confirmed unless a rule says otherwise.
ALWAYS_CONFIRM: Final = re.compile(r"publish|send|charge|refund|cancel", re.I)
TOOL_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# A tool's wire name is `{pack}__{operation}`: the pack's own name never holds "__" or ends with "_".
PACK_NAME: Final = re.compile(r"^(?!.*__)[a-z][a-z0-9_]{0,22}[a-z0-9]$|^[a-z]$")
_MAX_DEPTH: Final = 16
_SUMMARY_CHARS: Final = 1024

Location = Literal["path", "query", "header"]


class InvalidSpec(ValueError):
    """The document is not a valid OpenAPI 3 document (the validator's message)."""


@dataclass(frozen=True)
class Parameter:
    name: str  # as the API names it
    key: str  # as the tool's input names it (unique across locations)
    location: Location
    required: bool


@dataclass(frozen=True)
class Operation:
    tool_name: str
    operation_id: str
    method: str
    path: str
    summary: str
    input_schema: dict[str, Any]
    parameters: tuple[Parameter, ...] = field(default_factory=tuple)
    body: Literal["json", "form"] | None = None
    body_required: bool = False

    @property
    def side_effects(self) -> Literal["read", "write"]:
        return "read" if self.method in READS else "write"

    @property
    def idempotent(self) -> bool:
        """Safe to send twice by HTTP's own rules (RFC 9110 §9.2.2)."""
        return self.method in IDEMPOTENT

    @property
    def confirm(self) -> Literal["never", "destructive", "always"]:
        """The default gate: DELETE is destructive; publishing, sending, charging, refunding and
        cancelling always ask. A pack's rules may change either."""
        if self.method == "delete":
            return "destructive"
        if ALWAYS_CONFIRM.search(self.operation_id) or ALWAYS_CONFIRM.search(self.path):
            return "always"
        return "never"


def load_spec(source: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
    """Parse (YAML or JSON) and validate an OpenAPI 3.0/3.1 document."""
    if isinstance(source, Mapping):
        spec = dict(source)
    else:
        try:
            spec = yaml.safe_load(source)
        except yaml.YAMLError as exc:
            raise InvalidSpec(f"not YAML or JSON: {exc}") from None
    if not isinstance(spec, dict) or "openapi" not in spec:
        raise InvalidSpec("not an OpenAPI 3 document (no `openapi` field)")
    try:
        validate(spec)
    except OpenAPIValidationError as exc:
        where = "/".join(str(p) for p in getattr(exc, "path", ()) or ())
        raise InvalidSpec(f"{exc.message}" + (f" (at {where})" if where else "")) from None
    return spec


def operations(pack: str, spec: Mapping[str, Any]) -> list[Operation]:
    """Every operation of the document as a tool of `pack`, in document order."""
    if not PACK_NAME.match(pack):
        raise ValueError(f"pack name {pack!r}: lowercase letters, digits and _, starting with a letter, at most 24")
    root = SchemaPath.from_dict(dict(spec))
    taken: set[str] = set()
    out = []
    for path, method, op in _operations(root):
        operation_id = str(_value(op, "operationId") or f"{method}_{path}")
        tool_name = _unique(f"{pack}__{_sanitize(operation_id)}", taken)
        parameters, properties, required = _parameters(root / "paths" / path, op)
        body, body_required = None, False
        if "requestBody" in op:
            request = op / "requestBody"
            body_required = bool(_value(request, "required", False))
            body, schema = _body(request)
            if body is None and body_required:
                continue  # a file upload or another body a model cannot write: no tool
            if body is not None:
                properties["body"] = {**schema, "description": str(_value(request, "description", "") or "The request body.")}
                if body_required:
                    required.append("body")
        input_schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            input_schema["required"] = required
        if not str(spec.get("openapi", "")).startswith("3.1"):
            input_schema = json_schema_of_oas30(input_schema)
        summary = str(_value(op, "summary") or _value(op, "description") or f"{method.upper()} {path}")
        out.append(Operation(tool_name=tool_name, operation_id=operation_id, method=method, path=path,
                             summary=summary.strip()[:_SUMMARY_CHARS], input_schema=input_schema,
                             parameters=tuple(parameters), body=body, body_required=body_required))
    return out


def _operations(root: SchemaPath) -> Iterator[tuple[str, str, SchemaPath]]:
    paths = root / "paths"
    for path in paths.keys():
        item = paths / path
        for method in METHODS:
            if method in item:
                yield str(path), method, item / method


def _parameters(item: SchemaPath, op: SchemaPath) -> tuple[list[Parameter], dict[str, Any], list[str]]:
    """Path-level parameters, overridden by the operation's (same name and place), cookies left out."""
    found: dict[tuple[str, str], SchemaPath] = {}
    for owner in (item, op):
        if "parameters" in owner:
            for p in owner / "parameters":
                found[(str(_value(p, "name")), str(_value(p, "in")))] = p
    parameters, properties, required = [], {}, []
    for (name, where), p in found.items():
        if where not in ("path", "query", "header"):
            continue
        key = name if name not in properties else f"{where}_{name}"
        must = where == "path" or bool(_value(p, "required", False))
        schema = inline(p / "schema") if "schema" in p else {"type": "string"}
        if description := _value(p, "description"):
            schema = {**schema, "description": str(description)}
        properties[key] = schema
        if must:
            required.append(key)
        parameters.append(Parameter(name=name, key=key, location=where, required=must))  # type: ignore[arg-type]
    return parameters, properties, required


def _body(request: SchemaPath) -> tuple[Literal["json", "form"] | None, dict[str, Any]]:
    """The body a model can write — JSON first, else a URL-encoded form — and its schema."""
    if "content" not in request:
        return None, {}
    content = request / "content"
    found: dict[Literal["json", "form"], str] = {}
    for media in map(str, content.keys()):
        name = media.split(";")[0].strip()
        if name in ("application/json", "application/merge-patch+json") or name.endswith("+json"):
            found.setdefault("json", media)
        elif name == "application/x-www-form-urlencoded":
            found.setdefault("form", media)
    for kind in ("json", "form"):
        if kind in found:
            entry = content / found[kind]
            return kind, inline(entry / "schema") if "schema" in entry else {"type": "object"}
    return None, {}


def inline(node: SchemaPath, depth: int = 0) -> Any:
    """A schema with every `$ref` replaced by what it names; a schema that refers to itself stops at
    `_MAX_DEPTH` as a plain object."""
    if depth > _MAX_DEPTH:
        return {"type": "object"}
    with node.open() as value:
        if isinstance(value, Mapping):
            return {str(k): inline(node / k, depth + 1) for k in value.keys() if k not in ("xml", "example", "examples")}
        if isinstance(value, list):
            return [inline(node / i, depth + 1) for i in range(len(value))]
        return value


def json_schema_of_oas30(schema: Any) -> Any:
    """An OpenAPI 3.0 schema object as the JSON Schema (2020-12) a tool's input_schema must be:
    `nullable: true` becomes a "null" type, boolean `exclusiveMinimum`/`exclusiveMaximum` become the
    numbers they qualify. (3.1 documents already are JSON Schema.)"""
    if isinstance(schema, list):
        return [json_schema_of_oas30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: json_schema_of_oas30(v) for k, v in schema.items() if k != "nullable"}
    if schema.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "enum" in out:
            out["enum"] = [*out["enum"], None]
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(bound), bool):
            if out.pop(bound) and limit in out:
                out[bound] = out.pop(limit)
    return out


def _value(node: SchemaPath, key: str, default: Any = None) -> Any:
    """A scalar under `key` (its `$ref` followed), or `default`."""
    return (node / key).read_value() if key in node else default


def _sanitize(name: str) -> str:
    clean = re.sub(r"[^a-zA-Z0-9_-]+", "_", name).strip("_") or "operation"
    return clean


def _unique(name: str, taken: set[str]) -> str:
    base = name[:64]
    candidate, n = base, 2
    while candidate in taken:
        suffix = f"_{n}"
        candidate, n = base[: 64 - len(suffix)] + suffix, n + 1
    taken.add(candidate)
    assert TOOL_NAME.match(candidate), candidate
    return candidate
