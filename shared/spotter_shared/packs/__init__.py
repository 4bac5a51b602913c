"""Seed 002's tool packs, the parts the spotter command and the tool-runner share: an OpenAPI document's operations as tools, and constraint rules."""
