"""The `program_templates` router (seed 000)."""

from __future__ import annotations

from ..declaration import ToolRouter

router = ToolRouter("program_templates")
