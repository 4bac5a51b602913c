"""Request dependencies: the verified caller and their membership in the path's organization."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated

import asyncpg
from fastapi import Depends, Path, Request

from spotter_shared.auth import TokenError, TokenVerifier
from spotter_shared.contracts.commands import Actor
from spotter_shared.errors import ErrorCode, SpotterError

from .locales import resolve_locale


@dataclass(frozen=True)
class Caller:
    user_id: str
    email: str
    full_name: str
    locale: str


def parse_uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise SpotterError(ErrorCode.INVALID_REQUEST, f"{what} is not a valid id.") from None


async def pool(request: Request) -> asyncpg.Pool:
    # async: a plain `def` dependency would cost every request a hop to a worker thread.
    return request.app.state.pool


Pool = Annotated[asyncpg.Pool, Depends(pool)]


async def current_caller(request: Request, db: Pool) -> Caller:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise SpotterError(ErrorCode.UNAUTHORIZED, "Missing bearer token.")
    verifier: TokenVerifier = request.app.state.verifier
    try:
        sub = verifier.subject(token.strip())
    except TokenError:
        raise SpotterError(ErrorCode.UNAUTHORIZED, "Invalid or expired token.") from None
    try:
        user_id = uuid.UUID(sub)
    except ValueError:
        raise SpotterError(ErrorCode.UNAUTHORIZED, "Invalid token subject.") from None
    row = await db.fetchrow("SELECT id, email, full_name, locale FROM users WHERE id = $1", user_id)
    if row is None:
        raise SpotterError(ErrorCode.UNAUTHORIZED, "Unknown user.")
    return Caller(user_id=str(row["id"]), email=row["email"], full_name=row["full_name"], locale=row["locale"])


CurrentCaller = Annotated[Caller, Depends(current_caller)]


async def org_member(request: Request, caller: CurrentCaller, db: Pool, org_id: Annotated[str, Path(alias="orgId")]) -> Actor:
    org_uuid = parse_uuid(org_id, "orgId")
    row = await db.fetchrow(
        """SELECT id, role::text AS role FROM memberships
           WHERE organization_id = $1 AND user_id = $2 AND status = 'active'""",
        org_uuid, uuid.UUID(caller.user_id),
    )
    if row is None:
        # Non-members learn nothing about the organization's existence.
        raise SpotterError(ErrorCode.NOT_FOUND, "Organization not found.")
    return Actor(
        user_id=caller.user_id, organization_id=str(org_uuid), membership_id=str(row["id"]),
        role=row["role"], locale=request_locale(request, caller.locale),
    )


Member = Annotated[Actor, Depends(org_member)]


async def staff_member(actor: Member) -> Actor:
    # Seed 000: send/confirm/pick/undo are staff-only in v1.
    if actor.role == "member":
        raise SpotterError(ErrorCode.FORBIDDEN, "The assistant is available to staff only.")
    return actor


Staff = Annotated[Actor, Depends(staff_member)]


def request_locale(request: Request, stored: str | None) -> str:
    """`x-locale`, then `accept-language`, then the user's stored locale, then `en`; a malformed
    header is passed over, never an error."""
    return resolve_locale(request.headers.get("x-locale"), request.headers.get("accept-language"), stored)
