"""Seed 003's member coach: its own tools, never mixed with the studio's."""
