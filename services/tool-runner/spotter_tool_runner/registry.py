"""Registry of tool declarations: lookup by router/action, the role-filtered catalog, and the
consistency check that keeps facts about tools on their declarations."""

from __future__ import annotations

import difflib
from types import ModuleType

from spotter_shared.contracts.tools import ToolName, ToolSpec

from .declaration import KNOWN_ROLES, ToolDecl, wire_name
from .packs.tool import PackTool


class RegistryError(ValueError):
    """The declarations contradict each other or the rules every tool must follow."""


class Registry:
    def __init__(self, decls: list[ToolDecl] | None = None) -> None:
        # Insertion order is the catalog order: a stable tools array keeps the prompt cache warm.
        self._decls: list[ToolDecl] = []
        self._by_name: dict[str, ToolDecl] = {}
        for decl in decls or []:
            self.register(decl)

    def register(self, decl: ToolDecl) -> ToolDecl:
        # Duplicates are kept so that check() can report them; lookups see the first.
        self._decls.append(decl)
        self._by_name.setdefault(decl.name, decl)
        return decl

    def register_module(self, module: ModuleType) -> None:
        """Register every declaration a tools module defines, in definition order."""
        for value in vars(module).values():
            if isinstance(value, ToolDecl):
                self.register(value)

    def get(self, router: str, action: str) -> ToolDecl | None:
        return self._by_name.get(wire_name(router, action))

    def __iter__(self):
        return iter(self._decls)

    def __len__(self) -> int:
        return len(self._decls)

    def names(self) -> list[str]:
        return [d.name for d in self._decls]

    def close_names(self, router: str, action: str, *, role: str | None = None, n: int = 3) -> list[str]:
        """Names resembling an unknown one, among those `role` may use: the hint for the model."""
        names = [d.name for d in self._decls if role is None or role in d.roles]
        return difflib.get_close_matches(wire_name(router, action), names, n=n, cutoff=0.5)

    def for_role(self, role: str) -> list[ToolSpec]:
        return [spec_of(d) for d in self._decls if role in d.roles]

    def check(self) -> None:
        """Raise RegistryError listing every problem found (not just the first)."""
        problems: list[str] = []
        seen: set[str] = set()
        for d in self._decls:
            if d.name in seen:
                problems.append(f"{d.name}: declared twice")
            seen.add(d.name)
        for d in self._decls:
            problems.extend(f"{d.name}: {p}" for p in _problems(d, self))
        if problems:
            raise RegistryError("invalid tool registry:\n  " + "\n  ".join(problems))


def _problems(d: ToolDecl, registry: Registry) -> list[str]:
    found: list[str] = []
    if ToolName.SEPARATOR in d.router or "." in d.router or "." in d.action or not d.router or not d.action:
        found.append("router/action must be non-empty and contain no dots or '__' in the router")
    if not d.roles:
        found.append("no role may use it")
    if unknown := sorted(d.roles - KNOWN_ROLES):
        found.append(f"unknown roles {unknown}")
    if d.side_effects == "write" and d.audit is None:
        found.append("write tool without audit")
    if d.kind == "user_picker" and d.side_effects != "read":
        found.append("user_picker tool with side effects")
    if d.inverse is not None and registry.get(d.inverse.router, d.inverse.action) is None:
        found.append(f"inverse {d.inverse.name} is not registered")
    return found


def spec_of(d: ToolDecl | PackTool) -> ToolSpec:
    """The catalog entry of a tool, Spotter's own or a pack's."""
    return ToolSpec(
        name=d.name,
        router=d.router,
        action=d.action,
        summary=d.summary,
        input_schema=d.input_schema,
        side_effects=d.side_effects,
        confirm=d.confirm,
        kind=d.kind,
        has_inverse=d.inverse is not None,
        pack=d.router if isinstance(d, PackTool) else None,
    )
