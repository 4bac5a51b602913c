"""Seed 003's member coach: a second agent on the orchestrator's runtime (its loop, context and initializer)."""
