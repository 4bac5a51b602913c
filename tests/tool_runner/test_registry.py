"""Unit tests of the declaration API and the registry (no servers)."""

from __future__ import annotations

import pytest
from pydantic import Field, ValidationError

from spotter_tool_runner.declaration import Audit, Inverse, ToolDecl, ToolInput, agent_tool
from spotter_tool_runner.registry import Registry, RegistryError
from spotter_tool_runner.tools import REGISTRY

from .sample_tools import build_test_registry


class NameInput(ToolInput):
    full_name: str = Field(description="A name.")
    include_inactive: bool = Field(default=False, description="A flag.")


def decl(router: str = "things", action: str = "get", **kwargs) -> ToolDecl:
    async def handler(ctx, args):
        return {}

    return agent_tool(router=router, action=action, summary="s", input=NameInput, **kwargs)(handler)


def test_default_registry_is_consistent_and_uses_wire_names() -> None:
    REGISTRY.check()
    assert REGISTRY.names() == [
        "read__get_current_context",
        "read__programs_list",
        "read__members_search",
        "read__members_get",
        "read__ask_user_to_pick",
        "workouts__create",
        "workouts__update",
        "workouts__set_sections",
        "workouts__delete",
        "programs__create",
        "programs__update",
        "programs__delete",
        "programs__enroll_member",
        "tasks__list",
        "tasks__create",
        "tasks__update",
        "tasks__complete",
        "tasks__delete",
    ]
    for spec in REGISTRY.for_role("owner"):
        assert spec.name == f"{spec.router}__{spec.action}"
        assert "." not in spec.name


# (side effects, confirm, kind, has inverse) as seed 000's tables declare them.
SEED_000 = {
    "read__get_current_context": ("read", "never", "normal", False),
    "read__programs_list": ("read", "never", "normal", False),
    "read__members_search": ("read", "never", "normal", False),
    "read__members_get": ("read", "never", "normal", False),
    "read__ask_user_to_pick": ("read", "never", "user_picker", False),
    "workouts__create": ("write", "never", "normal", True),
    "workouts__update": ("write", "never", "normal", False),
    "workouts__set_sections": ("write", "never", "normal", False),
    "workouts__delete": ("write", "destructive", "normal", False),
    "programs__create": ("write", "never", "normal", True),
    "programs__update": ("write", "never", "normal", False),
    "programs__delete": ("write", "destructive", "normal", False),
    "programs__enroll_member": ("write", "never", "normal", False),
    "tasks__list": ("read", "never", "normal", False),
    "tasks__create": ("write", "never", "normal", True),
    "tasks__update": ("write", "never", "normal", False),
    "tasks__complete": ("write", "never", "normal", False),
    "tasks__delete": ("write", "destructive", "normal", False),
}


def test_the_catalog_carries_seed_000s_confirm_and_inverse_metadata() -> None:
    owner = {s.name: (s.side_effects, s.confirm, s.kind, s.has_inverse) for s in REGISTRY.for_role("owner")}
    assert owner == SEED_000
    inverses = {d.name: d.inverse.name for d in REGISTRY if d.inverse is not None}
    assert inverses == {
        "workouts__create": "workouts__delete",
        "programs__create": "programs__delete",
        "tasks__create": "tasks__delete",
    }
    assert all(d.inverse.build_input({"id": "x", "title": "t"}) == {"id": "x"} for d in REGISTRY if d.inverse)
    # Every write is audited under a resource and an action label.
    assert all(d.audit and d.audit.resource and d.audit.action_label for d in REGISTRY if d.side_effects == "write")


def test_only_owners_and_admins_may_delete_programs() -> None:
    for role in ("owner", "admin"):
        assert "programs__delete" in [s.name for s in REGISTRY.for_role(role)]
    coach = [s.name for s in REGISTRY.for_role("coach")]
    assert "programs__delete" not in coach and len(coach) == len(REGISTRY) - 1
    assert REGISTRY.for_role("member") == []


def test_the_picker_schema_bounds_its_candidates() -> None:
    schema = REGISTRY.get("read", "ask_user_to_pick").input_schema
    assert set(schema["properties"]) == {"kind", "prompt", "candidates"}
    candidates = schema["properties"]["candidates"]
    assert (candidates["minItems"], candidates["maxItems"]) == (2, 8)


def test_catalog_is_filtered_by_role_in_a_stable_order() -> None:
    registry = build_test_registry()
    owner = [s.name for s in registry.for_role("owner")]
    coach = [s.name for s in registry.for_role("coach")]
    assert "test__owner_only" in owner and "test__owner_only" not in coach
    assert [n for n in owner if n != "test__owner_only"] == coach
    assert registry.for_role("member") == []
    assert [s.name for s in registry.for_role("owner")] == owner  # same order every time
    create = next(s for s in registry.for_role("owner") if s.name == "test__create_note")
    assert create.has_inverse and create.side_effects == "write"
    assert next(s for s in registry.for_role("owner") if s.name == "test__pick").kind == "user_picker"


def test_input_schema_is_by_alias_and_closed() -> None:
    schema = decl().input_schema
    assert set(schema["properties"]) == {"fullName", "includeInactive"}
    assert schema["required"] == ["fullName"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["fullName"]["description"] == "A name."


def test_tool_input_accepts_camel_case_and_rejects_unknown_fields() -> None:
    assert NameInput.model_validate({"fullName": "Saar"}).full_name == "Saar"
    assert NameInput.model_validate({"full_name": "Saar"}).full_name == "Saar"
    with pytest.raises(ValidationError) as info:
        NameInput.model_validate({"fullName": "Saar", "includeInactve": True})
    assert info.value.errors()[0]["loc"] == ("includeInactve",)


def test_get_finds_by_router_and_action() -> None:
    registry = Registry([decl("a", "x"), decl("b", "x")])
    assert registry.get("b", "x").router == "b"
    assert registry.get("a", "y") is None
    assert registry.close_names("a", "z") == ["a__x", "b__x"]


@pytest.mark.parametrize(
    ("decls", "problem"),
    [
        ([decl("a", "x"), decl("a", "x")], "a__x: declared twice"),
        (
            [
                decl(
                    inverse=Inverse("things", "delete", lambda out: {"id": out["id"]}),
                    side_effects="write",
                    audit=Audit("thing", "thing.created"),
                )
            ],
            "inverse things__delete is not registered",
        ),
        ([decl(roles=frozenset({"owner", "janitor"}))], "unknown roles ['janitor']"),
        ([decl(roles=frozenset())], "no role may use it"),
        ([decl(side_effects="write")], "write tool without audit"),
        (
            [decl(kind="user_picker", side_effects="write", audit=Audit("thing", "thing.picked"))],
            "user_picker tool with side effects",
        ),
        ([decl(router="my.router")], "no dots"),
    ],
)
def test_check_rejects_inconsistent_declarations(decls: list[ToolDecl], problem: str) -> None:
    with pytest.raises(RegistryError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        Registry(decls).check()


def test_check_accepts_a_resolvable_inverse() -> None:
    create = decl(
        action="create",
        side_effects="write",
        audit=Audit("thing", "thing.created"),
        inverse=Inverse("things", "delete", lambda out: {"id": out["id"]}),
    )
    delete = decl(action="delete", side_effects="write", audit=Audit("thing", "thing.deleted"), confirm="destructive")
    Registry([create, delete]).check()
    assert create.inverse.build_input({"id": "p1", "name": "x"}) == {"id": "p1"}
