"""The declaration API: a tool is a handler declared on its router, which carries the defaults its tools share.

    router = ToolRouter("tasks", resource="task", roles=STAFF)

    @router.write("create", "Create a task …", inverse="delete")
    async def create(ctx: ToolContext, args: TasksCreateInput) -> Task: ...

A decorator returns a `ToolDecl`; registries collect declarations, the runner executes them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Self, TypeAlias, get_args, get_type_hints

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic.json_schema import GenerateJsonSchema

from spotter_shared.contracts.commands import Role
from spotter_shared.contracts.tools import ToolName

if TYPE_CHECKING:
    import asyncpg

    from .context import ToolContext

SideEffects = Literal["read", "write"]
Confirm = Literal["never", "destructive", "always"]
Kind = Literal["normal", "user_picker"]

KNOWN_ROLES: frozenset[str] = frozenset(get_args(Role))
STAFF: frozenset[str] = frozenset({"owner", "admin", "coach"})
# Who may delete a program, run a bulk write or see the studio's money (README: role choices).
OWNER_ADMIN: frozenset[str] = frozenset({"owner", "admin"})

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
    """Base of typed tool outputs: serialised camelCase, like every other payload the model reads.

    Fields are typed as the database returns them (a UUID is a `uuid.UUID`); JSON turns them into strings."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True, frozen=True)

    @classmethod
    def from_row(cls, row: asyncpg.Record | Mapping[str, Any], **values: Any) -> Self:
        """Validate a row whose columns are named as the fields (extra columns are ignored), plus `values`."""
        return cls.model_validate({**row, **values})


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


def id_of(out: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse input of a create: its stored output carries the new row's id."""
    return {"id": out["id"]}


@dataclass(frozen=True)
class Inverse:
    """The tool that undoes this one. `build_input` receives the stored JSON output (camelCase keys),
    since undo runs later from the ai_tool_executions row."""

    router: str
    action: str
    build_input: Callable[[dict[str, Any]], dict[str, Any]] = id_of

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
    return ToolName(router, action).wire


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


# Audit labels are "{resource}.{past tense of the action}"; an action not listed here names its label.
PAST_TENSE = {"create": "created", "update": "updated", "delete": "deleted", "complete": "completed"}


class ToolRouter:
    """The tools of one router and the defaults they share, as pydantic-ai's FunctionToolset holds
    settings for all its tools and PrefixedToolset owns the name prefix: the router name, the audit
    resource of its writes and the roles that may use them. Each decorator adds one tool's own facts;
    the input model is the annotation of the handler's second parameter. Consistency across tools
    (unique names, resolvable inverses, …) is checked by `Registry.check()`."""

    def __init__(self, name: str, *, resource: str | None = None, roles: Iterable[str] = STAFF) -> None:
        self.name = name
        self.resource = resource
        self.roles = frozenset(roles)

    def read(
        self, action: str, summary: str, *, roles: Iterable[str] | None = None
    ) -> Callable[[Handler], ToolDecl]:
        """A tool without side effects, never confirmed."""
        return lambda handler: self._decl(action, summary, handler, roles=roles)

    def write(
        self,
        action: str,
        summary: str,
        *,
        confirm: Confirm = "never",
        inverse: str | Inverse | None = None,
        audit_label: str | None = None,
        resource: str | None = None,
        roles: Iterable[str] | None = None,
    ) -> Callable[[Handler], ToolDecl]:
        """A tool that changes data, audited as `resource` (the router's by default) under `audit_label`
        ("{resource}.{past tense of action}" by default). `inverse` undoes it: an action of this router,
        called with the id in the output, or an `Inverse` for anything else."""
        name, resource = wire_name(self.name, action), resource or self.resource
        if resource is None:
            raise TypeError(f"{name}: a write needs an audit resource, on its router or on the tool")
        if audit_label is None and action not in PAST_TENSE:
            raise TypeError(f"{name}: give its audit_label, which cannot be derived from {action!r}")
        audit = Audit(resource=resource, action_label=audit_label or f"{resource}.{PAST_TENSE[action]}")
        if isinstance(inverse, str):
            inverse = Inverse(router=self.name, action=inverse)
        return lambda handler: self._decl(
            action, summary, handler, roles=roles, side_effects="write", confirm=confirm, audit=audit, inverse=inverse
        )

    def picker(
        self, action: str, summary: str, *, input: type[ToolInput], roles: Iterable[str] | None = None
    ) -> ToolDecl:
        """A question for the user (kind user_picker), without a handler of its own: the runner only
        ever holds it, and the user's pick becomes its result."""

        async def answered_by_the_user(ctx: ToolContext, args: ToolInput) -> Output:
            raise ToolFailure("not_executable", f"{wire_name(self.name, action)} is answered by the user's pick.")

        return self._decl(action, summary, answered_by_the_user, input=input, roles=roles, kind="user_picker")

    def _decl(
        self,
        action: str,
        summary: str,
        handler: Handler,
        *,
        input: type[ToolInput] | None = None,
        roles: Iterable[str] | None = None,
        **facts: Any,
    ) -> ToolDecl:
        return ToolDecl(
            router=self.name,
            action=action,
            summary=summary,
            input=input or input_of(handler),
            handler=handler,
            roles=self.roles if roles is None else frozenset(roles),
            **facts,
        )


def input_of(handler: Handler) -> type[ToolInput]:
    """The ToolInput model a handler `(ctx, args: SomeInput)` declares for its second parameter."""
    params = list(inspect.signature(handler).parameters)
    try:
        model = get_type_hints(handler).get(params[1]) if len(params) == 2 else None
    except NameError:  # an annotation naming something the handler's module does not define
        model = None
    if not (isinstance(model, type) and issubclass(model, ToolInput)):
        raise TypeError(f"{handler.__qualname__}: annotate the second parameter with a ToolInput model")
    return model
