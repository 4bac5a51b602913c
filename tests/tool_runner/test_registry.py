"""Unit tests of the declaration API and the registry (no servers)."""

from __future__ import annotations

import uuid
from datetime import date
from typing import ClassVar

import pytest
from pydantic import Field, ValidationError
from pydantic_core import to_jsonable_python

from spotter_tool_runner.context import ToolContext
from spotter_tool_runner.declaration import (
    STAFF,
    Audit,
    Inverse,
    ToolDecl,
    ToolFailure,
    ToolInput,
    ToolOutput,
    ToolRouter,
)
from spotter_tool_runner.registry import Registry, RegistryError
from spotter_tool_runner.tools import REGISTRY
from spotter_tool_runner.tools.common import PatchInput

from .sample_tools import build_test_registry
from .test_seed_surface import SEED


class NameInput(ToolInput):
    full_name: str = Field(description="A name.")
    include_inactive: bool = Field(default=False, description="A flag.")


def decl(router: str = "things", action: str = "get", **kwargs) -> ToolDecl:
    """A declaration made field by field, so that it can break the rules a ToolRouter keeps."""

    async def handler(ctx, args):
        return {}

    return ToolDecl(router=router, action=action, summary="s", input=NameInput, handler=handler, **kwargs)


def test_default_registry_is_consistent_and_uses_wire_names() -> None:
    REGISTRY.check()
    assert REGISTRY.names() == [
        "read__get_current_context",
        "read__programs_list",
        "read__members_search",
        "read__members_get",
        "read__ask_user_to_pick",
        "read__exercises_search",
        "read__exercises_resolve_batch",
        "read__search_anything",
        "read__lookup_by_id",
        "read__workout_comments_in_program",
        "read__workout_comments_for_assignment",
        "workouts__create",
        "workouts__update",
        "workouts__set_sections",
        "workouts__delete",
        "programs__create",
        "programs__update",
        "programs__delete",
        "programs__enroll_member",
        "assignments__assign_personal",
        "assignments__update",
        "assignments__set_published",
        "assignments__delete",
        "assignments__mark_comments_read",
        "assignments__bulk_preview",
        "assignments__bulk_delete",
        "assignments__bulk_publish",
        "bookings__list_mine",
        "bookings__attendance_summary",
        "bookings__attendance_trend",
        "class_sessions__list_for_date",
        "class_sessions__create",
        "class_sessions__update",
        "class_sessions__publish",
        "class_sessions__unpublish",
        "class_sessions__cancel",
        "class_sessions__bulk_preview",
        "class_sessions__bulk_delete",
        "class_sessions__bulk_publish",
        "class_types__list_for_program",
        "analytics__revenue_summary",
        "analytics__revenue_trend",
        "analytics__members_summary",
        "analytics__members_growth",
        "analytics__at_risk_members",
        "analytics__popular_classes",
        "analytics__class_utilization",
        "analytics__coach_overview",
        "analytics__plan_distribution",
        "analytics__members_activation",
        "analytics__workouts_summary",
        "analytics__org_insights",
        "tasks__list",
        "tasks__create",
        "tasks__update",
        "tasks__complete",
        "tasks__delete",
        "program_templates__list",
        "program_templates__create",
        "program_templates__apply",
        "program_templates__from_history",
        "forms__list_pending_for_org",
        "forms__compliance_status_for_member",
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
# The rest of seed 000's surface, from its transcription in test_seed_surface.
SEED_000 |= {
    name.replace(".", "__"): (effects, confirm, "normal", inverse is not None)
    for name, (effects, confirm, inverse) in SEED.items()
    if name.replace(".", "__") not in SEED_000
}


def test_the_catalog_carries_seed_000s_confirm_and_inverse_metadata() -> None:
    owner = {s.name: (s.side_effects, s.confirm, s.kind, s.has_inverse) for s in REGISTRY.for_role("owner")}
    assert owner == SEED_000
    inverses = {d.name: d.inverse.name for d in REGISTRY if d.inverse is not None}
    assert inverses == {
        "workouts__create": "workouts__delete",
        "programs__create": "programs__delete",
        "class_sessions__create": "class_sessions__cancel",
        "class_sessions__publish": "class_sessions__unpublish",
        "tasks__create": "tasks__delete",
    }
    assert all(d.inverse.build_input({"id": "x", "title": "t"}) == {"id": "x"} for d in REGISTRY if d.inverse)
    # Every write is audited under a resource and an action label.
    assert all(d.audit and d.audit.resource and d.audit.action_label for d in REGISTRY if d.side_effects == "write")


# What only owners and admins may do: deleting a program, every bulk write, and the studio's money.
OWNER_ADMIN_ONLY = {
    "programs__delete", "assignments__bulk_delete", "assignments__bulk_publish", "class_sessions__bulk_delete",
    "class_sessions__bulk_publish", "analytics__revenue_summary", "analytics__revenue_trend",
    "analytics__plan_distribution",
}


def test_only_owners_and_admins_may_delete_programs() -> None:
    for role in ("owner", "admin"):
        assert "programs__delete" in [s.name for s in REGISTRY.for_role(role)]
        assert len(REGISTRY.for_role(role)) == len(REGISTRY)
    coach = [s.name for s in REGISTRY.for_role("coach")]
    assert "programs__delete" not in coach
    assert set(REGISTRY.names()) - set(coach) == OWNER_ADMIN_ONLY
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


# The router API: defaults on the router, facts on the tool ------------------------------------------


class ThingIdInput(ToolInput):
    id: uuid.UUID = Field(description="Thing id.")


class Thing(ToolOutput):
    id: uuid.UUID
    owner_membership_id: uuid.UUID | None
    due_on: date


things = ToolRouter("things", resource="thing")


@things.read("get", "Get a thing.")
async def get_thing(ctx: ToolContext, args: ThingIdInput) -> Thing:
    raise AssertionError("never called")


@things.write("create", "Create a thing.", inverse="delete")
async def create_thing(ctx: ToolContext, args: NameInput) -> Thing:
    raise AssertionError("never called")


@things.write("delete", "Delete a thing.", confirm="destructive", roles={"owner"})
async def delete_thing(ctx: ToolContext, args: ThingIdInput) -> dict:
    raise AssertionError("never called")


pick_thing = things.picker("pick", "Pick a thing.", input=NameInput)


def test_a_router_gives_its_tools_their_name_roles_and_audit_resource() -> None:
    assert (create_thing.name, create_thing.router, create_thing.action) == ("things__create", "things", "create")
    assert create_thing.input is NameInput and create_thing.input_schema == decl().input_schema
    assert (create_thing.side_effects, create_thing.confirm, create_thing.kind) == ("write", "never", "normal")
    assert create_thing.audit == Audit("thing", "thing.created") and create_thing.roles == STAFF
    assert create_thing.inverse.name == "things__delete"
    assert create_thing.inverse.build_input({"id": "t1", "ownerMembershipId": None}) == {"id": "t1"}
    assert (delete_thing.confirm, delete_thing.roles, delete_thing.inverse) == ("destructive", {"owner"}, None)
    assert delete_thing.audit == Audit("thing", "thing.deleted")
    assert (get_thing.side_effects, get_thing.audit, get_thing.input) == ("read", None, ThingIdInput)
    Registry([get_thing, create_thing, delete_thing, pick_thing]).check()


def test_an_audit_label_is_derived_from_the_action_or_given() -> None:
    async def handler(ctx: ToolContext, args: NameInput) -> dict:
        return {}

    given = things.write("set_owner", "s", resource="thing_owner", audit_label="thing.owner_set")(handler)
    assert given.audit == Audit("thing_owner", "thing.owner_set")
    with pytest.raises(TypeError, match="things__set_owner: give its audit_label"):
        things.write("set_owner", "s")
    with pytest.raises(TypeError, match="plain__create: a write needs an audit resource"):
        ToolRouter("plain").write("create", "s")


def test_the_input_model_is_the_annotation_of_the_handlers_second_parameter() -> None:
    async def untyped(ctx, args):
        return {}

    async def not_an_input(ctx: ToolContext, args: dict) -> dict:
        return {}

    for handler in (untyped, not_an_input):
        with pytest.raises(TypeError, match="annotate the second parameter with a ToolInput model"):
            things.read("get", "s")(handler)


async def test_a_picker_is_side_effect_free_and_has_no_handler_of_its_own() -> None:
    assert (pick_thing.kind, pick_thing.side_effects, pick_thing.input) == ("user_picker", "read", NameInput)
    with pytest.raises(ToolFailure) as info:
        await pick_thing(None, NameInput(full_name="x"))  # type: ignore[arg-type]
    assert info.value.code == "not_executable"


def test_an_output_is_validated_from_a_row_and_serialised_as_json() -> None:
    thing_id = uuid.uuid4()
    row = {"id": thing_id, "owner_membership_id": None, "due_on": date(2026, 3, 2), "deleted_at": None}
    thing = Thing.from_row(row)
    assert thing.id == thing_id
    assert to_jsonable_python(thing, by_alias=True) == {
        "id": str(thing_id),
        "ownerMembershipId": None,
        "dueOn": "2026-03-02",
    }
    assert Thing.from_row(row, owner_membership_id=thing_id).owner_membership_id == thing_id


class ThingPatch(PatchInput):
    REQUIRED: ClassVar = frozenset({"title"})

    title: str | None = Field(default=None, description="New title.")
    note: str | None = Field(default=None, description="New note; null clears it.")


def test_a_patch_sets_the_columns_named_by_the_fields_it_sends() -> None:
    thing_id = str(uuid.uuid4())
    assert ThingPatch.model_validate({"id": thing_id, "note": None, "title": "T"}).changed() == ["title", "note"]
    assert ThingPatch.model_validate({"id": thing_id, "note": "n"}).changed() == ["note"]
    with pytest.raises(ValidationError, match="send at least one field"):
        ThingPatch.model_validate({"id": thing_id})
    with pytest.raises(ValidationError, match="title cannot be cleared"):
        ThingPatch.model_validate({"id": thing_id, "title": None})
