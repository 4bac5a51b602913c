"""The declaration API: every fact about a tool sits on its `@agent_tool` decorator, next to its handler.

    @agent_tool(router="read", action="members_get", summary="…", input=MembersGetInput)
    async def members_get(ctx: ToolContext, args: MembersGetInput) -> MemberDetail: ...

The decorator returns a `ToolDecl`; registries collect declarations, the runner executes them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_args

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic.json_schema import GenerateJsonSchema

from spotter_shared.contracts.commands import Role

if TYPE_CHECKING:
    from .context import ToolContext

SideEffects = Literal["read", "write"]
Confirm = Literal["never", "destructive", "always"]
Kind = Literal["normal", "user_picker"]

KNOWN_ROLES: frozenset[str] = frozenset(get_args(Role))
STAFF: frozenset[str] = frozenset({"owner", "admin", "coach"})

# A handler returns a pydantic model or anything JSON-able; the runner stores the JSON form.
Output: TypeAlias = BaseModel | Mapping[str, Any]
Handler: TypeAlias = Callable[["ToolContext", Any], Awaitable[Output]]


class ToolInput(BaseModel):
    """Base of every tool input: camelCase as the model sees it, snake_case in Python.

    extra="forbid" so a misspelt field comes back to the model as an invalid_input error it can fix,
    instead of being silently dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
    )


class ToolOutput(BaseModel):
    """Base of typed tool outputs: serialised camelCase, like every other payload the model reads."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True, frozen=True)


class ToolFailure(Exception):
    """Raised by a handler for an expected failure. It becomes a typed error tool_result, not a crash."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class Audit:
    """audit_logs row written after a successful write (seed 000 "Audit logging")."""

    resource: str
    action_label: str


@dataclass(frozen=True)
class Inverse:
    """The tool that undoes this one. `build_input` receives the stored JSON output (camelCase keys),
    since undo runs later from the ai_tool_executions row, e.g. `lambda out: {"id": out["id"]}`."""

    router: str
    action: str
    build_input: Callable[[dict[str, Any]], dict[str, Any]]

    @property
    def name(self) -> str:
        return wire_name(self.router, self.action)


class _ToolSchema(GenerateJsonSchema):
    # Generated titles ("Membershipid") only cost the model tokens; descriptions carry the meaning.
    def field_title_should_be_set(self, schema) -> bool:  # type: ignore[no-untyped-def]
        return False


def input_schema(model: type[ToolInput]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, schema_generator=_ToolSchema)
    schema.pop("title", None)
    return schema


def wire_name(router: str, action: str) -> str:
    # Anthropic tool names allow no dots (SPEC decision 9).
    return f"{router}__{action}"


@dataclass(frozen=True)
class ToolDecl:
    router: str
    action: str
    summary: str
    input: type[ToolInput]
    handler: Handler
    roles: frozenset[str] = STAFF
    side_effects: SideEffects = "read"
    confirm: Confirm = "never"
    audit: Audit | None = None
    inverse: Inverse | None = None
    kind: Kind = "normal"
    input_schema: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Generated once, by alias: this is what the model sees and must send back.
        object.__setattr__(self, "input_schema", input_schema(self.input))

    @property
    def name(self) -> str:
        return wire_name(self.router, self.action)

    async def __call__(self, ctx: ToolContext, args: ToolInput) -> Output:
        return await self.handler(ctx, args)


def agent_tool(
    *,
    router: str,
    action: str,
    summary: str,
    input: type[ToolInput],
    roles: frozenset[str] = STAFF,
    side_effects: SideEffects = "read",
    confirm: Confirm = "never",
    audit: Audit | None = None,
    inverse: Inverse | None = None,
    kind: Kind = "normal",
) -> Callable[[Handler], ToolDecl]:
    """Declare a tool. Consistency across tools (unique names, resolvable inverses, …) is checked
    by `Registry.check()`, since a single declaration cannot see the others."""

    def decorate(handler: Handler) -> ToolDecl:
        return ToolDecl(
            router=router,
            action=action,
            summary=summary,
            input=input,
            handler=handler,
            roles=frozenset(roles),
            side_effects=side_effects,
            confirm=confirm,
            audit=audit,
            inverse=inverse,
            kind=kind,
        )

    return decorate
