"""The tool surface is exactly seed 000's: 63 `router.action` names, each with the seed's side
effects, confirmation and inverse, and every inverse buildable from its original's output."""

from __future__ import annotations

import uuid

from spotter_tool_runner.tools import REGISTRY

R, W = "read", "write"
N, D, A = "never", "destructive", "always"

# router.action → (side effects, confirm, inverse), transcribed from seed 000's router tables.
SEED: dict[str, tuple[str, str, str | None]] = {
    **{f"read.{a}": (R, N, None) for a in (
        "get_current_context", "programs_list", "members_search", "members_get", "exercises_search",
        "exercises_resolve_batch", "ask_user_to_pick", "search_anything", "lookup_by_id",
        "workout_comments_in_program", "workout_comments_for_assignment")},
    "workouts.create": (W, N, "workouts.delete"), "workouts.update": (W, N, None),
    "workouts.set_sections": (W, N, None), "workouts.delete": (W, D, None),
    "programs.create": (W, N, "programs.delete"), "programs.update": (W, N, None),
    "programs.delete": (W, D, None), "programs.enroll_member": (W, N, None),
    "assignments.assign_personal": (W, N, None), "assignments.update": (W, N, None),
    "assignments.set_published": (W, N, None), "assignments.delete": (W, D, None),
    "assignments.mark_comments_read": (W, N, None), "assignments.bulk_preview": (R, N, None),
    "assignments.bulk_delete": (W, D, None), "assignments.bulk_publish": (W, A, None),
    **{f"bookings.{a}": (R, N, None) for a in ("list_mine", "attendance_summary", "attendance_trend")},
    "class_sessions.list_for_date": (R, N, None), "class_sessions.create": (W, N, "class_sessions.cancel"),
    "class_sessions.update": (W, N, None), "class_sessions.publish": (W, N, "class_sessions.unpublish"),
    "class_sessions.unpublish": (W, N, None), "class_sessions.cancel": (W, D, None),
    "class_sessions.bulk_preview": (R, N, None), "class_sessions.bulk_delete": (W, D, None),
    "class_sessions.bulk_publish": (W, A, None),
    "class_types.list_for_program": (R, N, None),
    **{f"analytics.{a}": (R, N, None) for a in (
        "revenue_summary", "revenue_trend", "members_summary", "members_growth", "at_risk_members",
        "popular_classes", "class_utilization", "coach_overview", "org_insights", "plan_distribution",
        "members_activation", "workouts_summary")},
    "tasks.list": (R, N, None), "tasks.create": (W, N, "tasks.delete"), "tasks.update": (W, N, None),
    "tasks.complete": (W, N, None), "tasks.delete": (W, D, None),
    "program_templates.list": (R, N, None), "program_templates.create": (W, N, None),
    "program_templates.apply": (W, A, None), "program_templates.from_history": (W, A, None),
    "forms.list_pending_for_org": (R, N, None), "forms.compliance_status_for_member": (R, N, None),
}


def test_the_seed_lists_63_actions() -> None:
    assert len(SEED) == 63


def test_exactly_the_seed_actions_are_declared() -> None:
    declared = {f"{d.router}.{d.action}" for d in REGISTRY}
    assert sorted(declared - SEED.keys()) == [], "declared but not in seed 000"
    assert sorted(SEED.keys() - declared) == [], "in seed 000 but not declared"


def test_side_effects_confirmation_and_inverses_match_the_seed() -> None:
    for d in REGISTRY:
        effects, confirm, inverse = SEED[f"{d.router}.{d.action}"]
        declared_inverse = f"{d.inverse.router}.{d.inverse.action}" if d.inverse else None
        assert (d.side_effects, d.confirm, declared_inverse) == (effects, confirm, inverse), d.name


def test_every_inverse_resolves_and_takes_the_original_output() -> None:
    for d in REGISTRY:
        if d.inverse is None:
            continue
        target = REGISTRY.get(d.inverse.router, d.inverse.action)
        assert target is not None, d.name
        # What undo builds from a stored output (camelCase JSON with the new row's id) validates.
        built = d.inverse.build_input({"id": str(uuid.uuid4())})
        target.input.model_validate(built)


def test_members_never_reach_studio_tools() -> None:
    assert [d.name for d in REGISTRY if "member" in d.roles] == []
