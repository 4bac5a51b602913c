"""Spotter tool-runner: the role-filtered tool catalog and at-most-once tool execution."""
