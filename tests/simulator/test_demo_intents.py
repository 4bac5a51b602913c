"""The demo policy, one example per router (seed 000's example prompts among them), as unit tests of
`respond(body)`: the first call, the calls chained from real tool outputs, and the final sentence."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from spotter_sim.demo import GREETING_EXAMPLES
from spotter_tool_runner.tools import (
    analytics, assignments, bookings, bulk, class_sessions, class_types, forms, program_templates, programs, read, tasks,
    workouts,
)

from .demo_chat import (
    COACH, DANI, DANIS, DECLARATIONS, NOW, OWNER, SAAR_LEVI, SAARS, Chat, context, detail, member, members, picked, uid,
    without,
)

COACHING, PERSONAL = uid(200), uid(201)
PROGRAMS = read.ProgramsList(programs=[
    read.ProgramItem(id=COACHING, name="Coaching", kind="coaching", description=None, is_active=True),
    read.ProgramItem(id=uid(202), name="CrossFit", kind="group", description=None, is_active=True),
    read.ProgramItem(id=PERSONAL, name="Personal Coaching", kind="coaching", description=None, is_active=True),
])
TOKEN = "9f2c1e7a5b3d4c6e8f0a1b2c3d4e5f60"


# --- read --------------------------------------------------------------------------------------------


def test_who_am_i():
    chat = Chat("who am I?")
    assert chat.call() == ("read__get_current_context", {})
    chat.answer(context())
    assert chat.text() == "You are Noa Owner (owner) at Demo Gym. It's Wednesday, 2031-02-05 there."


def test_find_saar_asks_which_and_opens_the_pick():
    chat = Chat("find Saar")
    assert chat.call() == ("read__members_search", {"query": "Saar"})
    chat.answer(SAARS)
    name, given = chat.call()
    assert name == "read__ask_user_to_pick" and given["kind"] == "member" and given["prompt"] == "Which Saar?"
    assert [(c["id"], c["label"], c["sublabel"]) for c in given["candidates"]] == [
        (str(uid(2)), "Saar Cohen", "Unlimited"), (str(SAAR_LEVI), "Saar Levi", "3x/week")]
    chat.answer(picked(SAAR_LEVI, "Saar Levi"))
    assert chat.call() == ("read__members_get", {"membershipId": str(SAAR_LEVI)})
    chat.answer(detail(SAAR_LEVI, "Saar Levi", "3x/week", "overdue", 12))
    assert chat.text() == "Here is Saar Levi — 3x/week, payment overdue; active since 2030-03-01, last visit 12 days ago."


def test_find_one_member_answers_from_the_search():
    chat = Chat("find Saar Levi")
    chat.call()
    chat.answer(members(member(SAAR_LEVI, "Saar Levi", "3x/week", "overdue")))
    assert chat.text() == "Found Saar Levi — 3x/week, payment overdue."


def test_member_plan_and_payment_takes_the_whole_name_match():
    chat = Chat("show me Dani's plan + payment status")
    assert chat.call() == ("read__members_search", {"query": "Dani"})
    chat.answer(DANIS)  # Dani Rubin and Daniel Katz: "Dani" is a whole word of one name only
    assert chat.call() == ("read__members_get", {"membershipId": str(DANI)})
    chat.answer(detail(DANI, "Dani Rubin", "Personal training", "due", 2))
    assert chat.text() == "Here is Dani Rubin — Personal training, payment due; active since 2030-03-01, last visit 2 days ago."


def test_member_plan_asks_when_two_share_the_name():
    chat = Chat("what's Saar's payment status?")
    assert chat.call() == ("read__members_search", {"query": "Saar"})
    chat.answer(SAARS)
    name, given = chat.call()
    assert name == "read__ask_user_to_pick" and given["prompt"] == "Which Saar?"
    chat.answer(picked(SAAR_LEVI, "Saar Levi"))
    assert chat.call() == ("read__members_get", {"membershipId": str(SAAR_LEVI)})


def test_find_murph_searches_everything_when_no_member_matches():
    murph = uid(300)
    chat = Chat("find Murph")
    assert chat.call() == ("read__members_search", {"query": "Murph"})
    chat.answer(members())
    assert chat.call() == ("read__search_anything", {"query": "Murph"})
    chat.answer(read.SearchAnythingResult(
        hits=[read.Hit(kind="workout", id=murph, label="Murph", detail="2030-05-27, CrossFit", score=1.0)],
        totals=read.HitTotals(workout=1), matched_by="name_and_meaning"))
    assert chat.call() == ("read__lookup_by_id", {"type": "workout", "id": str(murph)})
    chat.answer(read.WorkoutLookup(
        id=murph, title="Murph", kind="structured", description="Partition as needed.", scheduled_for=date(2030, 5, 27),
        program_id=uid(202), program_name="CrossFit", comments=3,
        sections=["Murph (For time): Run, Pull-up, Push-up, Air Squat, Run"]))
    assert chat.text() == "Murph (2030-05-27, CrossFit): Murph (For time): Run, Pull-up, Push-up, Air Squat, Run."


def test_find_without_search_anything_says_no_member_matched():
    chat = Chat("find Murph", tools=without(OWNER, "read__search_anything"))
    chat.call()
    chat.answer(members())
    assert chat.text() == "No members matched that search."


def test_find_a_squat_variation():
    chat = Chat("find a squat variation")
    assert chat.call() == ("read__exercises_search", {"query": "squat"})
    names = ["Back Squat", "Front Squat", "Goblet Squat", "Overhead Squat", "Air Squat", "Box Squat"]
    chat.answer(read.ExercisesSearchResult(total=8, exercises=[
        read.ExerciseItem(id=uid(400 + i), name=n, aliases=[], modality="weightlifting", equipment=["barbell"],
                          scope="global", score=0.8) for i, n in enumerate(names)], matched_by="name_and_meaning"))
    assert chat.text() == "Found 8 exercises: Back Squat, Front Squat, Goblet Squat, Overhead Squat, Air Squat and 3 more."


def test_new_comments_in_coaching():
    chat = Chat("any new comments in coaching?")
    assert chat.call() == ("read__programs_list", {})
    chat.answer(PROGRAMS)  # "Personal Coaching" contains the word too; the exact name wins
    assert chat.call() == ("read__workout_comments_in_program", {"programId": str(COACHING), "unreadOnly": True})
    chat.answer(read.CommentsInProgram(program_id=COACHING, program_name="Coaching", total=2, unread=2, comments=[
        read.ProgramComment(id=uid(500), on="workout", workout_id=uid(501), assignment_id=None, title="Week 6 · Engine",
                            day=date(2031, 2, 4), author_membership_id=uid(6), author_name="Maya Peretz", author_role="member",
                            body="Did 9 rounds, scaled to ring rows.", created_at="2031-02-04T19:10:00+02:00", read=False),
        read.ProgramComment(id=uid(502), on="workout", workout_id=uid(501), assignment_id=None, title="Week 6 · Engine",
                            day=date(2031, 2, 4), author_membership_id=uid(7), author_name="Omer Katz", author_role="member",
                            body="Legs were toast.", created_at="2031-02-04T18:40:00+02:00", read=False)]))
    assert chat.text() == (
        "2 new comments in Coaching. Latest: Maya Peretz on Week 6 · Engine (2031-02-04): \"Did 9 rounds, scaled to "
        "ring rows.\"; Omer Katz on Week 6 · Engine (2031-02-04): \"Legs were toast.\".")


def test_comments_in_an_unknown_program():
    chat = Chat("any comments in yoga?")
    chat.call()
    chat.answer(PROGRAMS)
    assert chat.text() == "There's no program called yoga. Your programs: Coaching, CrossFit, Personal Coaching."


def test_what_dani_said_on_mondays_wod():
    assignment = uid(600)
    chat = Chat("what did Dani say on Monday's WOD?")
    assert chat.call() == ("read__members_search", {"query": "Dani"})
    chat.answer(DANIS)
    assert chat.call() == ("read__get_current_context", {})
    chat.answer(context())
    # Monday is the one before the studio's today (Wednesday 2031-02-05).
    assert chat.call() == ("assignments__bulk_preview", {"fromDate": "2031-02-03", "toDate": "2031-02-03",
                                                         "membershipId": str(DANI)})
    chat.answer(bulk.Preview(count=1, truncated=False, selection_token=TOKEN, items=[
        {"id": str(assignment), "date": "2031-02-03", "member": "Dani Rubin", "title": "Monday's WOD", "published": True}]))
    assert chat.call() == ("read__workout_comments_for_assignment", {"assignmentId": str(assignment)})
    chat.answer(read.AssignmentThread(total=1, assignment=read.AssignmentLookup(
        id=assignment, title="Monday's WOD", scheduled_for=date(2031, 2, 3), membership_id=DANI, member_name="Dani Rubin",
        coach_membership_id=uid(8), coach_name="Tal Coach", program_id=PERSONAL, program_name="Personal Coaching",
        workout_id=None, workout_title=None, notes=None, published=True, comments=1, unread_comments=1), comments=[
        read.ThreadComment(id=uid(601), author_membership_id=DANI, author_name="Dani Rubin", author_role="member",
                           body="Felt strong on the squats, but my left knee was sore on the lunges — should I swap them "
                                "for step-ups next time?", created_at="2031-02-03T19:40:00+02:00", read=False)]))
    assert chat.text() == (
        "On Monday's WOD (2031-02-03), Dani Rubin wrote: \"Felt strong on the squats, but my left knee was sore on the "
        "lunges — should I swap them for step-ups next time?\".")


def test_what_dani_said_when_there_is_no_assignment_that_day():
    chat = Chat("what did Dani say on Monday's WOD?")
    chat.call()
    chat.answer(DANIS)
    chat.call()
    chat.answer(context())
    chat.call()
    chat.answer(bulk.Preview(count=0, items=[], truncated=False, selection_token=TOKEN))
    assert chat.text() == "Dani Rubin has no personal assignment on 2031-02-03."


# --- workouts, programs ------------------------------------------------------------------------------


def _resolved(written: str, name: str, n: int) -> read.Resolution:
    return read.Resolution(input=written, status="resolved", match="exact", exercise=read.ExerciseRef(id=uid(n), name=name),
                           candidates=[])


def test_build_a_workout():
    chat = Chat("build a workout: 3 rounds — 200m run, 30 double-unders")
    assert chat.call() == ("read__exercises_resolve_batch", {"names": ["200m run", "30 double-unders"]})
    chat.answer(read.ExercisesResolveBatchResult(resolved=2, ambiguous=0, unknown=0, results=[
        _resolved("200m run", "Run", 700), _resolved("30 double-unders", "Double-Under", 701)]))
    assert chat.call() == ("workouts__create", {"title": "3 rounds: Run, Double-Under", "sections": [
        {"name": "Metcon", "format": "3 rounds", "movements": [{"name": "Run", "distanceM": 200},
                                                               {"name": "Double-Under", "reps": 30}]}]})
    chat.answer(workouts.Workout(
        id=uid(710), title="3 rounds: Run, Double-Under", description=None, kind="structured", scheduled_for=None,
        program_id=None, program_name=None, sections=[workouts.Section(position=1, name="Metcon", format="3 rounds", notes=None,
        movements=[workouts.Movement(position=1, name="Run", distance_m=200),
                   workouts.Movement(position=2, name="Double-Under", reps=30)])]))
    assert chat.text() == ("Created the workout \"3 rounds: Run, Double-Under\": 3 rounds of 200 m Run, 30 Double-Under. "
                           "You can undo it.")


def test_build_a_workout_asks_about_an_ambiguous_movement():
    chat = Chat("build a workout called Quick Engine: AMRAP 12 — 10 KB swings @ 24kg, 400m run")
    assert chat.call() == ("read__exercises_resolve_batch", {"names": ["10 KB swings @ 24kg", "400m run"]})
    chat.answer(read.ExercisesResolveBatchResult(resolved=1, ambiguous=1, unknown=0, results=[
        read.Resolution(input="10 KB swings @ 24kg", status="ambiguous", match=None, exercise=None, candidates=[
            read.ExerciseCandidate(id=uid(720), name="Kettlebell Swing", score=0.7),
            read.ExerciseCandidate(id=uid(721), name="American Kettlebell Swing", score=0.6)]),
        _resolved("400m run", "Run", 700)]))
    name, given = chat.call()
    assert name == "read__ask_user_to_pick" and given["kind"] == "exercise" and given["prompt"] == "Which kb swings?"
    assert [c["label"] for c in given["candidates"]] == ["Kettlebell Swing", "American Kettlebell Swing"]
    chat.answer(picked(uid(721), "American Kettlebell Swing", kind="exercise"))
    assert chat.call() == ("workouts__create", {"title": "Quick Engine", "sections": [
        {"name": "Metcon", "format": "AMRAP 12", "movements": [
            {"name": "American Kettlebell Swing", "reps": 10, "loadKg": 24.0}, {"name": "Run", "distanceM": 400}]}]})


def test_build_a_workout_without_the_resolver_uses_the_written_names():
    chat = Chat("build a workout: 3 rounds — 200m run, 30 double-unders", tools=without(OWNER, "read__exercises_resolve_batch"))
    name, given = chat.call()
    assert name == "workouts__create"
    assert given["sections"][0]["movements"] == [{"name": "Run", "distanceM": 200}, {"name": "Double-unders", "reps": 30}]


def test_what_programs_do_we_run():
    chat = Chat("what programs do we run?")
    assert chat.call() == ("read__programs_list", {})
    chat.answer(PROGRAMS)
    assert chat.text() == "Your programs: Coaching, CrossFit, Personal Coaching."


def test_create_a_program():
    chat = Chat("create a program called Strength Club")
    assert chat.call() == ("programs__create", {"name": "Strength Club"})
    chat.answer(programs.Program(id=uid(800), name="Strength Club", description=None, kind="group", is_active=True))
    assert chat.text() == "Created the group program \"Strength Club\". You can undo it."


def test_create_a_coaching_program():
    assert Chat("create a new coaching program named \"Run Club\"").call() == (
        "programs__create", {"name": "Run Club", "kind": "coaching"})


# --- assignments -------------------------------------------------------------------------------------


def test_assign_dani_a_personal_session_tomorrow():
    chat = Chat("assign Dani a personal session tomorrow")
    assert chat.call() == ("read__members_search", {"query": "Dani"})
    chat.answer(DANIS)
    assert chat.call() == ("read__get_current_context", {})
    chat.answer(context())
    assert chat.call() == ("assignments__assign_personal", {
        "membershipId": str(DANI), "scheduledFor": "2031-02-06", "title": "Personal session"})
    chat.answer(assignments.Assignment(
        id=uid(900), membership_id=DANI, member_name="Dani Rubin", coach_membership_id=None, coach_name=None,
        title="Personal session", notes=None, scheduled_for=date(2031, 2, 6), workout_id=None, workout_title=None,
        program_id=None, program_name=None, published=False, published_at=None))
    assert chat.text() == "Assigned \"Personal session\" to Dani Rubin for 2031-02-06 (a draft until you publish it)."


def test_publish_next_weeks_assignments_binds_the_preview_token():
    chat = Chat("publish next week's assignments")
    assert chat.call() == ("read__get_current_context", {})
    chat.answer(context())
    selection = {"fromDate": "2031-02-10", "toDate": "2031-02-16", "published": False}
    assert chat.call() == ("assignments__bulk_preview", selection)
    chat.answer(bulk.Preview(count=2, truncated=False, selection_token=TOKEN, items=[
        {"id": str(uid(901)), "date": "2031-02-10", "member": "Dani Rubin", "title": "Monday's WOD", "published": False},
        {"id": str(uid(902)), "date": "2031-02-13", "member": "Dani Rubin", "title": "Thursday strength", "published": False}]))
    turn = chat.step()
    assert [(u.name, u.input) for u in turn.tool_uses] == [("assignments__bulk_publish", selection | {"selectionToken": TOKEN})]
    assert turn.text == "That's 2 assignments from 2031-02-10 to 2031-02-16; I'll publish them once you approve."
    assert DECLARATIONS["assignments__bulk_publish"].confirm == "always"  # the app asks before it runs
    chat.answer(assignments.BulkResult(count=2, changed=2, ids=[uid(901), uid(902)], truncated=False))
    assert chat.text() == "Published 2 assignments."


def test_publish_with_nothing_to_publish():
    chat = Chat("publish next week's assignments")
    chat.call()
    chat.answer(context())
    chat.call()
    chat.answer(bulk.Preview(count=0, items=[], truncated=False, selection_token=TOKEN))
    assert chat.text() == "There are no unpublished assignments from 2031-02-10 to 2031-02-16; nothing to publish."


def test_a_coach_cannot_bulk_publish():
    assert Chat("publish next week's assignments", tools=COACH).text() == (
        "I'd use bulk publish for that, but that tool isn't available to me here.")


# --- bookings, class sessions, class types -----------------------------------------------------------


def test_attendance_this_month():
    chat = Chat("how was attendance this month?")
    assert chat.call() == ("read__get_current_context", {})
    chat.answer(context())
    assert chat.call() == ("bookings__attendance_summary", {"dateFrom": "2031-02-01", "dateTo": "2031-02-05"})
    by_type = [bookings.ClassTypeAttendance(class_type_id=uid(1000), class_name="WOD", sessions=10, bookings=120, attended=100,
                                            no_shows=20, attendance_rate=0.833),
               bookings.ClassTypeAttendance(class_type_id=uid(1001), class_name="Open Gym", sessions=6, bookings=30, attended=27,
                                            no_shows=3, attendance_rate=0.9)]
    chat.answer(bookings.AttendanceSummary(date_from=date(2031, 2, 1), date_to=date(2031, 2, 5), by_class_type=by_type,
                                           sessions=16, bookings=150, attended=127, no_shows=23, attendance_rate=0.847))
    assert chat.text() == ("From 2031-02-01 to 2031-02-05: 16 classes held, 150 bookings, 127 attended (85%), 23 no-shows. "
                           "Most held: WOD 10 classes at 83%, Open Gym 6 classes at 90%.")


def test_attendance_without_a_period_uses_the_tools_default():
    assert Chat("how's attendance?").call() == ("bookings__attendance_summary", {})


def _session(n: int, name: str, start: str, end: str, booked: int, capacity: int, published: bool = True) -> class_sessions.ClassSession:
    return class_sessions.ClassSession(
        id=uid(n), class_type_id=uid(n + 50), class_name=name, starts_at=start, ends_at=end, coach_membership_id=None,
        coach_name=None, capacity=capacity, booked=booked, published=published, cancelled=False, notes=None)


def test_schedule_open_gym_tomorrow():
    chat = Chat("schedule open gym tomorrow 13:00–14:00 published")
    assert chat.call() == ("read__get_current_context", {})
    chat.answer(context())
    assert chat.call() == ("class_sessions__create", {
        "className": "Open Gym", "date": "2031-02-06", "startTime": "13:00", "endTime": "14:00", "published": True})
    chat.answer(_session(1100, "Open Gym", "2031-02-06T13:00:00+02:00", "2031-02-06T14:00:00+02:00", 0, 20))
    assert chat.text() == "Scheduled Open Gym on 2031-02-06, 13:00–14:00 (published, 20 places). You can undo it."


def test_schedule_a_class_on_a_weekday_in_twelve_hour_time():
    chat = Chat("schedule a WOD class on Friday 6pm-7pm")
    chat.call()
    chat.answer(context())
    assert chat.call() == ("class_sessions__create", {
        "className": "WOD", "date": "2031-02-07", "startTime": "18:00", "endTime": "19:00", "published": False})


def test_schedule_without_times_asks_for_them():
    assert Chat("schedule open gym tomorrow").text() == (
        "What time should Open Gym start and end? For example: schedule open gym tomorrow 13:00–14:00.")


@pytest.mark.parametrize("prompt", ["what's on the schedule today?", "מה יש בלו״ז היום?", "איזה שיעורים יש?", "מתי המפגש?",
                                    "יש סשן היום?", "מה בלו\"ז"])
def test_todays_schedule(prompt: str):
    chat = Chat(prompt)
    assert chat.call() == ("class_sessions__list_for_date", {})
    chat.answer(class_sessions.SessionsOfDay(date=date(2031, 2, 5), timezone="Asia/Jerusalem", total=2, sessions=[
        _session(1200, "WOD", "2031-02-05T07:00:00+02:00", "2031-02-05T08:00:00+02:00", 12, 16),
        _session(1201, "Open Gym", "2031-02-05T13:00:00+02:00", "2031-02-05T14:00:00+02:00", 3, 20, published=False)]))
    assert chat.text() == "2 classes on 2031-02-05: 07:00 WOD (12/16 booked), 13:00 Open Gym (3/20 booked, not published)."


@pytest.mark.parametrize("prompt", ["what's on the schedule tomorrow?", "מה השיעורים מחר?"])
def test_tomorrows_schedule_asks_the_studio_for_its_date(prompt: str):
    chat = Chat(prompt)
    assert chat.call() == ("read__get_current_context", {})
    chat.answer(context())
    assert chat.call() == ("class_sessions__list_for_date", {"date": "2031-02-06"})


def test_delete_next_weeks_classes_binds_the_preview_token():
    chat = Chat("delete next week's classes")
    assert chat.call() == ("read__get_current_context", {})
    chat.answer(context())
    selection = {"dateFrom": "2031-02-10", "dateTo": "2031-02-16"}
    assert chat.call() == ("class_sessions__bulk_preview", selection)
    chat.answer(bulk.Preview(count=18, truncated=False, selection_token=TOKEN, items=[
        {"id": str(uid(1300)), "className": "WOD", "startsAt": "2031-02-10T07:00:00+02:00", "published": True, "booked": 4}]))
    turn = chat.step()
    assert [(u.name, u.input) for u in turn.tool_uses] == [("class_sessions__bulk_delete", selection | {"selectionToken": TOKEN})]
    assert turn.text == "That's 18 classes from 2031-02-10 to 2031-02-16; I'll delete them once you approve."
    assert DECLARATIONS["class_sessions__bulk_delete"].confirm == "destructive"  # the app asks before it runs
    chat.answer(class_sessions.BulkDeleted(deleted=18, bookings=40))
    assert chat.text() == "Deleted 18 classes (they had 40 bookings)."


def test_a_rejected_bulk_delete_changes_nothing():
    chat = Chat("delete next week's classes")
    chat.call()
    chat.answer(context())
    chat.call()
    chat.answer(bulk.Preview(count=1, items=[], truncated=False, selection_token=TOKEN))
    chat.call()
    chat.answer({"code": "rejected_by_user", "message": "The user rejected this action.", "hint": None}, is_error=True)
    assert chat.text() == "OK, I didn't run bulk delete; nothing changed."


def test_a_coach_cannot_bulk_delete_classes():
    assert Chat("delete next week's classes", tools=COACH).text() == (
        "I'd use bulk delete for that, but that tool isn't available to me here.")


def test_class_types():
    chat = Chat("which class types do we have?")
    assert chat.call() == ("class_types__list_for_program", {})
    chat.answer(class_types.ClassTypeList(total=2, class_types=[
        class_types.ClassType(id=uid(1400), name="Open Gym", program_id=uid(202), program_name="CrossFit", default_capacity=20,
                              duration_min=60, upcoming_sessions=14),
        class_types.ClassType(id=uid(1401), name="WOD", program_id=uid(202), program_name="CrossFit", default_capacity=16,
                              duration_min=60, upcoming_sessions=40)]))
    assert chat.text() == "You have 2 class types: Open Gym (CrossFit, 14 upcoming), WOD (CrossFit, 40 upcoming)."


def test_class_types_of_a_program():
    chat = Chat("what class types are there in the CrossFit program?")
    assert chat.call() == ("read__programs_list", {})
    chat.answer(PROGRAMS)
    assert chat.call() == ("class_types__list_for_program", {"programId": str(uid(202))})


# --- analytics, tasks, templates, forms ---------------------------------------------------------------


def test_members_at_risk():
    chat = Chat("which members are at risk?")
    assert chat.call() == ("analytics__at_risk_members", {})
    span = analytics.Span(from_=date(2031, 1, 23), to=date(2031, 2, 5))
    chat.answer(analytics.AtRiskMembers(
        recent=span, baseline=analytics.Span(from_=date(2030, 12, 24), to=date(2031, 1, 22)), currency="ILS", total=2,
        attendance_drops=1, payment_issues=1, members=[
            analytics.AtRiskMember(membership_id=uid(9), name="Eitan Golan", last_visit=datetime(2031, 1, 20, 7),
                                   visits_before=9, visits_recent=0, overdue=None, reasons=["attendance_drop"]),
            analytics.AtRiskMember(membership_id=SAAR_LEVI, name="Saar Levi", last_visit=None, visits_before=2,
                                   visits_recent=1, overdue="450.00", reasons=["payment_overdue"])]))
    assert chat.text() == ("2 members look at risk (1 attendance drops, 1 payment issues): Eitan Golan (attendance drop), "
                           "Saar Levi (payment overdue).")


def _figures(start: date, end: date, collected: str) -> dict:
    return {"period": analytics.Span(from_=start, to=end), "collected": collected, "payments": 80, "paying_members": 75,
            "arpu": "160.00"}


def test_revenue():
    chat = Chat("how is revenue?")
    assert chat.call() == ("analytics__revenue_summary", {})
    chat.answer(analytics.RevenueSummary(
        **_figures(date(2031, 1, 7), date(2031, 2, 5), "12000.00"), currency="ILS", refunded="0.00", failed="120.00",
        failed_payments=1, overdue="450.00", overdue_payments=3,
        previous=analytics.RevenueFigures(**_figures(date(2030, 12, 8), date(2031, 1, 6), "11000.00")), collected_change=0.091))
    assert chat.text() == ("From 2031-01-07 to 2031-02-05 you collected 12000.00 ILS from 80 payments (75 paying members), "
                           "up 9% on the period before. 3 payments (450.00 ILS) are overdue. 1 failed (120.00 ILS).")


def test_revenue_last_month():
    chat = Chat("how much revenue last month?")
    chat.call()
    chat.answer(context())
    assert chat.call() == ("analytics__revenue_summary", {"from": "2031-01-01", "to": "2031-01-31"})


def test_a_coach_gets_no_money_figures():
    chat = Chat("how is revenue?", tools=COACH)
    assert chat.text() == "I'd use revenue summary for that, but that tool isn't available to me here."
    assert "analytics__revenue_summary" not in {t["name"] for t in COACH}


def test_templates():
    chat = Chat("what templates do we have?")
    assert chat.call() == ("program_templates__list", {})
    chat.answer(program_templates.TemplatesList(total=1, templates=[program_templates.TemplateSummary(
        id=uid(1500), name="Beginner 6 weeks", description=None, program_kind="group", workout_count=18, span_days=42)]))
    assert chat.text() == "You have 1 template: Beginner 6 weeks (group, 18 workouts over 42 days)."


def test_pending_forms():
    chat = Chat("who hasn't filled their forms?")
    assert chat.call() == ("forms__list_pending_for_org", {})
    chat.answer(forms.PendingForms(total=2, overdue_total=1, assignments=[
        forms.PendingForm(assignment_id=uid(1600), membership_id=DANI, member_name="Dani Rubin", form_title="Liability waiver",
                          type_key="waiver", assigned_at=datetime(2031, 1, 20, 9), due_on=date(2031, 1, 27), overdue=True),
        forms.PendingForm(assignment_id=uid(1601), membership_id=SAAR_LEVI, member_name="Saar Levi", form_title="PAR-Q",
                          type_key="par_q", assigned_at=datetime(2031, 2, 1, 9), due_on=date(2031, 2, 8), overdue=False)]))
    assert chat.text() == ("2 forms still pending (1 overdue): Dani Rubin — Liability waiver (overdue since 2031-01-27); "
                           "Saar Levi — PAR-Q (due 2031-02-08).")


def test_overdue_forms_only():
    assert Chat("which waivers are overdue?").call() == ("forms__list_pending_for_org", {"overdueOnly": True})


def test_delete_a_task_by_name():
    chat = Chat("delete task call the plumber")
    assert chat.call() == ("tasks__list", {})
    chat.answer(tasks.TaskList(total=2, tasks=[
        tasks.Task(id=uid(1700), title="Order chalk", description=None, status="open", due_date=None,
                   assignee_membership_id=None, assignee_name=None, completed_at=None),
        tasks.Task(id=uid(1701), title="Call the plumber", description=None, status="open", due_date=None,
                   assignee_membership_id=None, assignee_name=None, completed_at=None)]))
    assert chat.call() == ("tasks__delete", {"id": str(uid(1701))})
    chat.answer(tasks.DeletedTask(id=uid(1701), title="Call the plumber"))
    assert chat.text() == "Deleted \"Call the plumber\"."


# --- the conversation around the plans ----------------------------------------------------------------


def test_greeting_lists_examples_the_catalog_can_answer():
    owner = Chat("hello").text()
    assert owner.startswith("Hi! I'm Spotter") and "\"find Saar\"" in owner and "\"how is revenue?\"" in owner
    coach = Chat("hello", tools=COACH).text()
    assert "revenue" not in coach and "\"which members are at risk?\"" in coach
    bare = Chat("hello", tools=[]).text()
    assert "can't use any studio tools" in bare


def test_an_app_event_is_not_the_users_words():
    """An Undo note merged with the next words (and an earlier batch's results) does not steer the plan."""
    note = ('<app_event kind="undo">The user pressed Undo on toolu_1; the app ran tasks__delete {"id": "x"} '
            "and it succeeded.</app_event>")
    chat = Chat([{"type": "text", "text": note}, {"type": "text", "text": "who am I?"}])
    assert chat.call() == ("read__get_current_context", {})


def test_new_words_after_unanswered_results_start_a_new_plan():
    chat = Chat("find Saar")
    chat.call()
    chat.answer(SAARS)
    chat.call()  # the picker; the user types instead of picking
    chat.answer({"code": "superseded", "message": "The user moved on."}, is_error=True)
    chat.messages[-1]["content"].append({"type": "text", "text": "never mind, who am I?"})
    assert chat.call() == ("read__get_current_context", {})


def test_dates_come_from_the_studio_clock_not_the_machine():
    chat = Chat("schedule open gym tomorrow 07:00-08:00")
    chat.call()
    chat.answer(context(now="2040-12-31T23:30:00-05:00", weekday="Monday"))
    _, given = chat.call()
    assert given["date"] == "2041-01-01" and given["published"] is False


@pytest.mark.parametrize(("prompt", "first"), [
    ("find Saar's plan", ("read__members_search", {"query": "Saar"})),
    ("find the workout Murph", ("read__search_anything", {"query": "Murph", "kinds": ["workout"]})),
    ("add a task called create a program for kids", ("tasks__create", {"title": "create a program for kids"})),
    ("search for members Sam Lee", ("read__members_search", {"query": "Sam Lee"})),
    ("which classes are on Friday?", ("read__get_current_context", {})),
    ("any comments on the CrossFit program?", ("read__programs_list", {})),
    ("assign a lower body session to Saar Levi on Friday", ("read__members_search", {"query": "Saar Levi"})),
    ("remove the classes for tomorrow", ("read__get_current_context", {})),
])
def test_the_most_specific_intent_wins(prompt: str, first: tuple):
    assert Chat(prompt).call() == first


@pytest.mark.parametrize("example", GREETING_EXAMPLES)
def test_every_greeting_example_starts_a_plan(example: str):
    assert Chat(example).step().tool_uses
