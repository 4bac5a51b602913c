"""The `class_sessions` router (seed 000)."""

from __future__ import annotations

from ..declaration import ToolRouter

router = ToolRouter("class_sessions")
