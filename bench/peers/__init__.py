"""Peer agent servers measured against Spotter in `make bench` (issue 14): see langgraph_peer.py."""
