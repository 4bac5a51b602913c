"""One writer per table (STYLE.md §12), checked on the source: no servers, no database.

What counts as a write. SQL lives in Python string literals, so every string constant of a module
is collected with `ast` (docstrings excepted: they never run), an f-string as its literal parts
with `{}` where each placeholder was. In that text, case-insensitively and across any whitespace:
  - `INSERT INTO t`, `DELETE FROM t` and `UPDATE t [[AS] alias] SET` write t (an optional schema,
    quotes and ONLY are skipped), each statement of a CTE on its own: `WITH s AS (UPDATE a SET …)
    INSERT INTO b …` writes a and b;
  - `ON CONFLICT … DO UPDATE SET` is part of its INSERT (only the INSERT's table is written), and
    `SELECT … FOR [NO KEY] UPDATE [OF x]` locks rows, it writes nothing.
A write's table must have an owner in `spotter_shared.ownership`, and that owner must be the writer.

Who writes. Each directory services/<name>/ is the service <name>. shared/spotter_shared and cli/
are the `spotter` command's code (migrations, demo seed, onboarding) and are checked as "cli",
except a shared module listed in SHARED_RUN_BY_SERVICE, whose SQL runs inside that service (none
today: the only shared modules with SQL are db.py, run by `spotter migrate`, and studio.py, used by
the demo seed and the test factories). DEMO_SEED lists the one exception, table by table.

Table names that are not literal (`f"UPDATE {table.name} SET …"`, `"DELETE FROM " + t`, `%s`)
cannot be read off the text, so the writer must state which tables its code may touch, at module
level in any module of the same service (a helper in one module is handed a table declared in
another), in one of two forms:
  - a dict, set, list or tuple literal whose every key or element is a string naming a table of the
    ownership map: `_SOFT_DELETABLE = {"workouts": "title", "tasks": "title"}`;
  - an assignment of a `Table(...)` call whose first argument is such a string: `PROGRAMS = Table("programs", …)`.
A dynamic write is taken to write every table its service so declares, and each must be the
writer's; a service with a dynamic write and no declaration is reported. This is a declaration,
not a data-flow proof: it trusts that the placeholder is drawn from those constants, which is what
a reviewer checks (tools/common.py says so next to its `Table`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spotter_shared.ownership import OWNER_BY_TABLE, OWNERS, TABLES, TABLES_BY_OWNER, Owner, owner_of

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / "shared" / "spotter_shared"
MIGRATIONS = SHARED / "migrations"

# shared/spotter_shared modules whose SQL runs inside a service: checked as that service.
SHARED_RUN_BY_SERVICE: dict[str, Owner] = {}

# The demo seed loads a studio's programs, workouts and tasks straight into the tool-runner's
# tables: it runs before any service is up (and is `spotter seed`'s whole job), so there is no one
# to ask. This is the only code allowed to write a table it does not own; an entry that no longer
# matches a write fails test_demo_seed_exceptions_are_still_needed, so the list only shrinks.
DEMO_SEED: dict[str, frozenset[str]] = {
    "cli/spotter_cli/seed.py": frozenset({"workouts", "workout_sections", "workout_movements", "tasks", "program_enrollments"}),
    "cli/spotter_cli/demo_year.py": frozenset({
        "programs", "workouts", "workout_sections", "workout_movements", "tasks", "program_enrollments", "assignments",
        "workout_comment_reads", "class_sessions", "bookings", "program_templates", "program_template_workouts",
    }),
    "shared/spotter_shared/studio.py": frozenset({"programs"}),
    "cli/spotter_cli/coach_seed.py": frozenset({
        "member_profiles", "member_settings", "member_locations", "member_goals", "member_preferences",
        "member_workout_logs",
    }),
}

PLACEHOLDER = "{}"

# A statement's target: a placeholder, or a (schema-qualified, quoted) name followed by what SQL
# allows there, or the end of the literal (`"DELETE FROM " + table`). Requiring the follow-up
# keeps prose ("insert into the form", "update your plan") from reading as SQL.
_TARGET = (
    r'(?:\s+(?:ONLY\s+)?(?:(?P<dynamic>\{[^{}]*\}|%(?:\(\w+\))?s)|(?!SET\b)(?:"?\w+"?\.)?"?(?P<table>[A-Za-z_]\w*)"?)'
    r"(?=FOLLOW)|\s+(?P<split>\Z))"
)
_STATEMENTS = [
    re.compile(r"\b" + verb + _TARGET.replace("FOLLOW", follow), re.IGNORECASE)
    for verb, follow in [
        (r"INSERT\s+INTO", r"(?:\s+AS\s+\w+)?\s*(?:[({;]|\Z|(?:VALUES|SELECT|DEFAULT|OVERRIDING)\b)"),
        (r"DELETE\s+FROM", r"(?:\s+(?:AS\s+)?(?!(?:WHERE|USING|RETURNING)\b)\w+)?\s*(?:[{;)]|\Z|(?:WHERE|USING|RETURNING)\b)"),
        (r"UPDATE", r"\s*\Z|\s+(?:(?:AS\s+)?(?!SET\b)\w+\s+)?SET\b"),
    ]
]
# `DO UPDATE SET` belongs to its INSERT; `FOR UPDATE`, `FOR NO KEY UPDATE` only lock rows.
_NOT_A_STATEMENT_AFTER = {"DO", "FOR", "KEY"}

_NAME = r'(?:"?\w+"?\.)?"?(?P<table>[A-Za-z_]\w*)"?'
_CREATE = re.compile(r"\bCREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?" + _NAME, re.IGNORECASE)
_DROP = re.compile(r"\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?" + _NAME, re.IGNORECASE)


@dataclass(frozen=True)
class Write:
    line: int
    table: str | None  # None: the name is a placeholder, not literal text


@dataclass(frozen=True)
class Offence:
    path: str
    line: int
    table: str
    writer: str
    owner: str | None
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.writer} writes {self.table} (owner: {self.owner or '—'}): {self.why}"


# --- the checker ---------------------------------------------------------------------------------


def _docstrings(tree: ast.Module) -> set[int]:
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {
        id(s.body[0].value)
        for s in scopes
        if s.body and isinstance(s.body[0], ast.Expr) and isinstance(s.body[0].value, ast.Constant)
    }


def string_literals(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(first line, text) of each string constant; an f-string as one text with {} per placeholder."""
    skip = _docstrings(tree) | {id(part) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for part in n.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(p.value if isinstance(p, ast.Constant) else PLACEHOLDER for p in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def writes_in_text(text: str) -> list[tuple[int, str | None]]:
    """(offset, table, or None when not literal) of each write statement in `text`."""
    found = []
    for statement in _STATEMENTS:
        for m in statement.finditer(text):
            before = text[: m.start()].split()
            if before and before[-1].upper() in _NOT_A_STATEMENT_AFTER:
                continue
            found.append((m.start(), m["table"].lower() if m["table"] else None))
    return sorted(found, key=lambda f: f[0])


def writes(tree: ast.Module) -> list[Write]:
    found = [
        Write(line=line + text.count("\n", 0, offset), table=table)
        for line, text in string_literals(tree)
        for offset, table in writes_in_text(text)
    ]
    return sorted(found, key=lambda w: w.line)


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def declared_tables(tree: ast.Module) -> set[str]:
    """Tables a module names at top level: a literal made of table names only, or the first
    argument of a `Table(...)` assigned to a name (`PROGRAMS = Table("programs", …)`). Other calls
    do not count: `ToolRouter("forms")` names a router, not the table it reads."""
    declared: set[str] = set()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in {"frozenset", "set", "tuple"}:
            value = value.args[0] if len(value.args) == 1 else None
        if isinstance(value, ast.Call) and _called(value) == "Table":
            items = value.args[:1]
        elif isinstance(value, ast.Dict):
            items = value.keys
        elif isinstance(value, (ast.Set, ast.List, ast.Tuple)):
            items = value.elts
        else:
            continue
        names = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
        if items and len(names) == len(items) and all(n in OWNER_BY_TABLE for n in names):
            declared.update(names)
    return declared


def offences(
    path: str, source: str, writer: str, allowed: frozenset[str] = frozenset(), declared: set[str] | None = None
) -> list[Offence]:
    """Every write in `source` of a table that `writer` does not own, or that nobody owns.
    `declared`: the tables the writer's modules declare; by default, those this module declares."""
    tree = ast.parse(source, filename=path)
    declared = declared_tables(tree) if declared is None else declared
    found: list[Offence] = []

    def check(line: int, table: str, why: str) -> None:
        owner = OWNER_BY_TABLE.get(table)
        if owner is None:
            found.append(Offence(path, line, table, writer, None, "no owner: add it to spotter_shared.ownership"))
        elif owner != writer and table not in allowed:
            found.append(Offence(path, line, table, writer, owner, why))

    for w in writes(tree):
        if w.table is not None:
            check(w.line, w.table, "another owner's table")
        elif not declared:
            why = "table name is not literal and its writer declares no table"
            found.append(Offence(path, w.line, "<dynamic>", writer, None, why))
        else:
            for table in sorted(declared):
                check(w.line, table, "declared by its writer, so a dynamic write may touch it")
    return found


def writer_of(path: Path) -> str:
    rel = path.relative_to(REPO)
    if rel.parts[0] == "services":
        return rel.parts[1]
    return SHARED_RUN_BY_SERVICE.get(rel.as_posix(), "cli")


def checked_files() -> list[Path]:
    roots = [d for d in sorted((REPO / "services").iterdir()) if d.is_dir()] + [SHARED, REPO / "cli"]
    return [p for root in roots for p in sorted(root.rglob("*.py"))]


def repo_offences() -> list[Offence]:
    sources = {p: p.read_text() for p in checked_files()}
    declared: dict[str, set[str]] = {}
    for path, source in sources.items():
        declared.setdefault(writer_of(path), set()).update(declared_tables(ast.parse(source)))
    found = []
    for path, source in sources.items():
        rel = path.relative_to(REPO).as_posix()
        found += offences(rel, source, writer_of(path), DEMO_SEED.get(rel, frozenset()), declared[writer_of(path)])
    return found


# --- the repository ------------------------------------------------------------------------------


def test_every_service_directory_is_an_owner() -> None:
    services = {d.name for d in (REPO / "services").iterdir() if d.is_dir()}
    assert services == set(OWNERS) - {"cli"}


def test_the_map_names_each_table_once() -> None:
    names = [t.name for t in TABLES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert sorted(n for tables in TABLES_BY_OWNER.values() for n in tables) == sorted(names)
    assert TABLES_BY_OWNER["gateway"] == ()  # it reads; what it needs changed, it asks for
    assert owner_of("ai_conversation_events") == "orchestrator"
    with pytest.raises(KeyError, match="no owner"):
        owner_of("members")


def test_each_table_is_written_only_by_its_owner() -> None:
    found = repo_offences()
    assert not found, f"{len(found)} write(s) of a table the writer does not own:\n" + "\n".join(map(str, found))


def test_demo_seed_exceptions_are_still_needed() -> None:
    for rel, tables in DEMO_SEED.items():
        written = {w.table for w in writes(ast.parse((REPO / rel).read_text()))}
        assert tables <= written, f"{rel} no longer writes {sorted(tables - written)}: drop them from DEMO_SEED"
        assert all(OWNER_BY_TABLE[t] != "cli" for t in tables), "a cli-owned table needs no exception"


def created_tables() -> set[str]:
    """Tables the migrations create (minus those they drop), and those shared code creates itself
    (db.py creates schema_migrations before the first migration runs)."""
    created: set[str] = set()
    for sql in sorted(MIGRATIONS.glob("*.sql")):
        text = sql.read_text()
        created |= {m["table"].lower() for m in _CREATE.finditer(text)}
        created -= {m["table"].lower() for m in _DROP.finditer(text)}
    for path in sorted(SHARED.rglob("*.py")):
        for _, text in string_literals(ast.parse(path.read_text())):
            created |= {m["table"].lower() for m in _CREATE.finditer(text)}
    return created


def test_every_created_table_has_an_owner_and_every_owned_table_exists() -> None:
    created = created_tables()
    assert not created - OWNER_BY_TABLE.keys(), "give these tables an owner in spotter_shared.ownership"
    assert not OWNER_BY_TABLE.keys() - created, "no migration creates these owned tables"


# --- the checker can fail ------------------------------------------------------------------------


def check(source: str, writer: str = "billing") -> list[tuple[int, str, str | None]]:
    return [(o.line, o.table, o.owner) for o in offences("synthetic.py", source, writer)]


def test_a_write_of_another_services_table_is_reported_with_its_line() -> None:
    source = 'import x\n\nSQL = """\nSELECT 1;\nUPDATE ai_conversations\n   SET cost = cost + $1\n WHERE id = $2"""\n'
    assert check(source) == [(5, "ai_conversations", "orchestrator")]
    assert check(source, writer="orchestrator") == []


def test_insert_update_and_delete_in_any_case_and_spacing_are_writes() -> None:
    source = (
        'a = "insert\\n   into\\tpublic.\\"tasks\\" (id) VALUES ($1)"\n'
        'b = "DELETE FROM ONLY audit_logs WHERE id = $1"\n'
        'c = "update workouts w set title = $1 where w.id = $2"\n'
    )
    assert check(source) == [(1, "tasks", "tool-runner"), (2, "audit_logs", "tool-runner"), (3, "workouts", "tool-runner")]


def test_select_for_update_is_not_a_write() -> None:
    source = (
        'a = "SELECT 1 FROM ai_conversations WHERE id = $1 FOR UPDATE"\n'
        'b = """SELECT e.id FROM ai_tool_executions e FOR UPDATE OF e\n"""\n'
        'c = "SELECT 1 FROM ai_turns FOR NO KEY UPDATE SKIP LOCKED"\n'
    )
    assert check(source) == []


def test_an_upsert_writes_only_the_inserted_table() -> None:
    source = '''Q = """INSERT INTO ai_usage_daily (org, day, n) VALUES ($1, $2, $3)
    ON CONFLICT (org, day) DO UPDATE
       SET n = ai_usage_daily.n + excluded.n"""
'''
    assert check(source, writer="orchestrator") == [(1, "ai_usage_daily", "billing")]
    assert check(source, writer="billing") == []


def test_both_statements_of_a_cte_are_writes() -> None:
    source = '''Q = """WITH s AS (UPDATE ai_conversations SET last_event_seq = last_event_seq + 1
                          WHERE id = $1 RETURNING last_event_seq)
               INSERT INTO ai_conversation_events (conversation_id, seq) SELECT $1, last_event_seq FROM s"""
'''
    assert check(source) == [(1, "ai_conversations", "orchestrator"), (3, "ai_conversation_events", "orchestrator")]


def test_a_table_without_owner_is_reported() -> None:
    assert check('q = "INSERT INTO ai_feedback (id) VALUES ($1)"') == [(1, "ai_feedback", None)]


def test_docstrings_and_prose_are_not_sql() -> None:
    source = '''"""Delete from the cache what expired; insert into the log later."""

def f():
    """Update the programs set by the user."""
    return ["Please update your plan. Insert into the form.", "update", "delete from"]
'''
    assert check(source) == []


def test_a_dynamic_table_needs_a_declaration_of_tables_its_writer_owns() -> None:
    write = 'def f(table, c):\n    return f"UPDATE {table} SET deleted_at = now() WHERE id = {c}"\n'
    assert check(write, writer="tool-runner") == [(2, "<dynamic>", None)]
    concatenated = 'def f(table):\n    return "DELETE FROM " + table\n'
    assert check(concatenated, writer="tool-runner") == [(2, "<dynamic>", None)]

    own = '_SOFT = {"workouts": "title", "tasks": "title"}\nSTATES = ("open", "done")\n' + write
    assert check(own, writer="tool-runner") == []
    own_calls = 'TASKS = Table("tasks", "task")\nOTHER = Table("not a table")\n' + write
    assert check(own_calls, writer="tool-runner") == []
    foreign = '_SOFT = frozenset({"workouts", "ai_messages"})\n' + write
    assert check(foreign, writer="tool-runner") == [(3, "ai_messages", "orchestrator")]
    foreign_call = 'MESSAGES = Table("ai_messages", "message")\n' + write
    assert check(foreign_call, writer="tool-runner") == [(3, "ai_messages", "orchestrator")]
    # A literal that is not made of table names only bounds nothing.
    unknown = '_SOFT = {"workouts", "members"}\n' + write
    assert check(unknown, writer="tool-runner") == [(3, "<dynamic>", None)]


def test_shared_and_cli_code_is_checked_as_the_cli() -> None:
    assert writer_of(SHARED / "db.py") == "cli"
    assert writer_of(REPO / "cli" / "spotter_cli" / "seed.py") == "cli"
    assert writer_of(REPO / "services" / "tool-runner" / "spotter_tool_runner" / "runner.py") == "tool-runner"
    paths = {p.relative_to(REPO).as_posix() for p in checked_files()}
    assert {"shared/spotter_shared/studio.py", "cli/spotter_cli/seed.py", "services/billing/spotter_billing/core.py"} <= paths
