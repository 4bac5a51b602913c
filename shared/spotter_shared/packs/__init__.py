"""Seed 002's tool packs: tools from OpenAPI documents, constraint rules as data, self-healing calls."""

# The Postgres channel `spotter packs` notifies (in the transaction that changes a pack) and every
# tool-runner listens on, so a pack is reloaded at run time without a restart.
CHANGED_CHANNEL = "spotter_packs"
