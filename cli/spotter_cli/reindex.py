"""`spotter reindex [--org ORG_ID]`: ask rag to bring its search index up to date — one
organization, or everything with the global exercise library — and print what it did.

Rag re-reads the source tables and embeds only documents whose text or model changed, so this is
safe to run at any time (after a bulk import, a model switch, or to check the index)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid

DEFAULT_TIMEOUT_S = 600.0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("reindex", help="bring rag's search index up to date (one organization or everything)")
    parser.add_argument("--org", metavar="ORG_ID", help="organization id (default: every organization and the global library)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds to wait for rag's answer (default {DEFAULT_TIMEOUT_S:.0f})")
    parser.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from spotter_shared.settings import CommonSettings

    if args.org is not None:
        try:
            uuid.UUID(args.org)
        except ValueError:
            print(f"--org {args.org!r} is not an organization id (a UUID)", file=sys.stderr)
            return 2
    if args.timeout <= 0:
        print("--timeout must be positive", file=sys.stderr)
        return 2
    return asyncio.run(reindex(CommonSettings().nats_url, args.org, args.timeout))


def create_broker(nats_url: str):
    """The command's broker with its one declared edge (asking REINDEX), so the AsyncAPI document
    can show the cli as REINDEX's sender. Fails fast instead of reconnecting for ever."""
    from faststream.nats import NatsBroker, NatsRouter

    from spotter_shared import bus
    from spotter_shared.contracts.rag import REINDEX

    router = NatsRouter()
    ask = bus.requester(router, REINDEX)
    broker = NatsBroker(nats_url, name="spotter-cli", max_reconnect_attempts=1, connect_timeout=5, allow_reconnect=False)
    broker.include_router(router)
    return broker, ask


async def reindex(nats_url: str, org_id: str | None, timeout_s: float) -> int:
    """Ask REINDEX over NATS; 0 and the counts on stdout, or 1 and the reason on stderr."""
    from nats.errors import NoRespondersError

    from spotter_shared.contracts.rag import ReindexRequest
    from spotter_shared.errors import RemoteError

    broker, ask = create_broker(nats_url)
    try:
        await broker.connect()
    except Exception as exc:  # noqa: BLE001 — any failure to connect is the same answer
        print(f"cannot reach NATS at {nats_url}: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    what = f"organization {org_id}" if org_id else "every organization and the global library"
    try:
        result = await ask(ReindexRequest(organization_id=org_id), timeout=timeout_s)
    except RemoteError as exc:
        print(f"rag refused: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except NoRespondersError:
        print("no rag service is answering on NATS (is it running?)", file=sys.stderr)
        return 1
    except TimeoutError:
        print(f"no answer from rag within {timeout_s:g} s (it may still be indexing; the sweep finishes the job)",
              file=sys.stderr)
        return 1
    finally:
        await broker.stop()
    print(f"reindexed {what}: {result.indexed} indexed, {result.unchanged} unchanged, {result.removed} removed "
          f"({result.model}, {result.duration_ms} ms)")
    return 0
