"""Every tool the agent has, one module per router. Importing this package builds the default registry."""

from __future__ import annotations

from ..registry import Registry
from . import (
    analytics, assignments, bookings, class_sessions, class_types, forms, program_templates, programs, read, tasks, workouts,
)

# Catalog order; a stable tools array keeps the model's prompt cache warm.
ROUTERS = (
    read, workouts, programs, assignments, bookings, class_sessions, class_types, analytics, tasks, program_templates, forms,
)


def build_registry() -> Registry:
    registry = Registry()
    for module in ROUTERS:
        registry.register_module(module)
    registry.check()
    return registry


REGISTRY = build_registry()
