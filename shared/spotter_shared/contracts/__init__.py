"""Every NATS subject with its one pydantic contract. Import this package to fill CATALOG."""

from . import billing, commands, events, rag, tools  # noqa: F401  (registers endpoints)
from .base import CATALOG, Contract, DeadLetter, Endpoint, ErrorReply

__all__ = ["CATALOG", "Contract", "DeadLetter", "Endpoint", "ErrorReply"]
