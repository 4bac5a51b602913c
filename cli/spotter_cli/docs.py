"""The README's generated parts: who writes each table (spotter_shared.ownership) and who sends and
receives each subject (the services' declared edges). `spotter docs` rewrites them; a test fails
when the README disagrees with the code."""

from __future__ import annotations

import re
from pathlib import Path

from spotter_shared.ownership import OWNERS, TABLES

from .asyncapi import edges

README = Path("README.md")


def owners_markdown() -> str:
    rows = ["| table | written only by | what it holds |", "|---|---|---|"]
    rows += [f"| `{t.name}` | {t.owner} | {t.what} |" for t in TABLES]
    idle = [o for o in OWNERS if not any(t.owner == o for t in TABLES)]
    verb = "owns no table: it only reads" if len(idle) == 1 else "own no table: they only read"
    note = f"\n{', '.join(idle)} {verb}.\n" if idle else ""
    return "\n".join(rows) + "\n" + note


def edges_markdown() -> str:
    rows = ["| subject | kind | contract | sent by | received by |", "|---|---|---|---|---|"]
    rows += [
        f"| `{e.subject}` | {e.pattern} | {e.contract} | {', '.join(e.senders) or '—'} | {', '.join(e.receivers) or '—'} |"
        for e in edges()
    ]
    return "\n".join(rows) + "\n"


def tools_markdown() -> str:
    """Every tool with its side effects, confirmation, inverse and the roles that may use it — the
    same facts the catalog is filtered by and the runner checks again at execution."""
    from spotter_tool_runner.tools import REGISTRY

    order = ("owner", "admin", "coach", "member")
    rows = ["| tool | effect | confirm | undo | roles |", "|---|---|---|---|---|"]
    for d in REGISTRY:
        kind = "picker" if d.kind == "user_picker" else d.side_effects
        inverse = f"`{d.inverse.name}`" if d.inverse else "—"
        roles = ", ".join(r for r in order if r in d.roles)
        rows.append(f"| `{d.name}` | {kind} | {d.confirm} | {inverse} | {roles} |")
    return "\n".join(rows) + f"\n\n{len(REGISTRY)} tools.\n"


BLOCKS = {"owners": owners_markdown, "edges": edges_markdown, "tools": tools_markdown}


def render(readme: str) -> str:
    """`readme` with each generated block (between `<!-- name:start -->` and `<!-- name:end -->`) redone."""
    for name, make in BLOCKS.items():
        pattern = re.compile(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", re.DOTALL)
        if not pattern.search(readme):
            raise ValueError(f"README has no {name} block")
        readme = pattern.sub(lambda m: m.group(1) + make() + m.group(2), readme)
    return readme
