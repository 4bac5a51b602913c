"""Seed 002's tool packs: tools from OpenAPI documents, constraint rules as data, self-healing calls."""
