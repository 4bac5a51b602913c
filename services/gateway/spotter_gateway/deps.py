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


def verified_user_id(request: Request) -> uuid.UUID:
    """The bearer token's verified subject; unauthorized when there is none."""
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
        return uuid.UUID(sub)
    except ValueError:
        raise SpotterError(ErrorCode.UNAUTHORIZED, "Invalid token subject.") from None


def unknown_user() -> SpotterError:
    return SpotterError(ErrorCode.UNAUTHORIZED, "Unknown user.")


async def current_caller(request: Request, db: Pool) -> Caller:
    user_id = verified_user_id(request)
    row = await db.fetchrow("SELECT id, email, full_name, locale FROM users WHERE id = $1", user_id)
    if row is None:
        raise unknown_user()
    return Caller(user_id=str(row["id"]), email=row["email"], full_name=row["full_name"], locale=row["locale"])


CurrentCaller = Annotated[Caller, Depends(current_caller)]

# The caller and their membership in one statement (a row for a known user; membership_id NULL for a
# non-member). MEMBER_COLUMNS and MEMBER_JOINS let a request that needs more in the same round trip
# (a send: its conversation and an earlier turn) select it alongside.
MEMBER_COLUMNS = "u.id, u.locale, m.id AS membership_id, m.role::text AS role"
MEMBER_JOINS = """FROM users u
  LEFT JOIN memberships m ON m.organization_id = $2 AND m.user_id = u.id AND m.status = 'active'"""
_MEMBER = f"SELECT {MEMBER_COLUMNS} {MEMBER_JOINS} WHERE u.id = $1"


async def org_uuid_of(request: Request, db: asyncpg.Pool, user_id: uuid.UUID, org_id: str) -> uuid.UUID:
    """The path's organization id; a malformed one is invalid_request — after an unknown user's
    unauthorized, as when the user was read before the membership."""
    try:
        return uuid.UUID(org_id)
    except ValueError:
        if await db.fetchval("SELECT 1 FROM users WHERE id = $1", user_id) is None:
            raise unknown_user() from None
        raise SpotterError(ErrorCode.INVALID_REQUEST, "orgId is not a valid id.") from None


def member_actor(request: Request, row: asyncpg.Record | None, org_uuid: uuid.UUID) -> Actor:
    """The actor from a MEMBER_COLUMNS row: unauthorized for an unknown user, not_found for a non-member."""
    if row is None:
        raise unknown_user()
    if row["membership_id"] is None:
        # Non-members learn nothing about the organization's existence.
        raise SpotterError(ErrorCode.NOT_FOUND, "Organization not found.")
    return Actor(
        user_id=str(row["id"]), organization_id=str(org_uuid), membership_id=str(row["membership_id"]),
        role=row["role"], locale=request_locale(request, row["locale"]),
    )


async def org_member(request: Request, org_id: Annotated[str, Path(alias="orgId")]) -> Actor:
    user_id = verified_user_id(request)
    db: asyncpg.Pool = request.app.state.pool
    org_uuid = await org_uuid_of(request, db, user_id, org_id)
    return member_actor(request, await db.fetchrow(_MEMBER, user_id, org_uuid), org_uuid)


Member = Annotated[Actor, Depends(org_member)]


def require_staff(actor: Actor) -> Actor:
    # Seed 000: send/confirm/pick/undo are staff-only in v1.
    if actor.role == "member":
        raise SpotterError(ErrorCode.FORBIDDEN, "The assistant is available to staff only.")
    return actor


async def staff_member(actor: Member) -> Actor:
    return require_staff(actor)


Staff = Annotated[Actor, Depends(staff_member)]


def request_locale(request: Request, stored: str | None) -> str:
    """`x-locale`, then `accept-language`, then the user's stored locale, then `en`; a malformed
    header is passed over, never an error."""
    return resolve_locale(request.headers.get("x-locale"), request.headers.get("accept-language"), stored)
