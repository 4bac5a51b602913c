"""Development sign-in: the demo studios' people as buttons, and a token for the one picked.

Anyone who can reach it can act as anyone listed, so it exists only outside production; there the
routes answer 403 before touching the database."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from spotter_shared.auth import issue_dev_token
from spotter_shared.errors import ErrorCode, SpotterError

from .deps import Pool
from .settings import GatewaySettings

router = APIRouter(prefix="/dev")

MAX_USERS = 40

# Staff first (owner, admin, coach), then members; a person in two studios appears once per studio.
_USERS = """
SELECT u.id, u.email, u.full_name, o.name AS organization_name, m.role::text AS role
  FROM memberships m
  JOIN users u ON u.id = m.user_id
  JOIN organizations o ON o.id = m.organization_id
 WHERE o.slug = ANY($1::text[]) AND m.status = 'active'
   AND ($3::text IS NULL OR u.full_name ILIKE $3 OR u.email ILIKE $3 OR o.name ILIKE $3)
 ORDER BY m.role, array_position($1::text[], o.slug::text), u.full_name, u.id
 LIMIT $2
"""

_BY_EMAIL = """
SELECT u.id FROM users u
 WHERE lower(u.email) = lower($1)
   AND EXISTS (SELECT 1 FROM memberships m JOIN organizations o ON o.id = m.organization_id
                WHERE m.user_id = u.id AND m.status = 'active' AND o.slug = ANY($2::text[]))
"""


def development_only(request: Request) -> GatewaySettings:
    settings: GatewaySettings = request.app.state.settings
    if settings.spotter_env == "production":
        raise SpotterError(ErrorCode.FORBIDDEN, "Development sign-in is disabled in production.")
    return settings


DevSettings = Annotated[GatewaySettings, Depends(development_only)]


class SignInBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    email: str = Field(min_length=3, max_length=320)


@router.get("/users")
async def dev_users(settings: DevSettings, db: Pool, q: Annotated[str | None, Query(max_length=100)] = None) -> dict[str, Any]:
    """The first MAX_USERS people, staff first; `q` narrows by name, email or studio (a demo studio
    has hundreds of members, so the page searches here rather than in what it was given)."""
    text = (q or "").strip()
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" if text else None
    rows = await db.fetch(_USERS, settings.spotter_dev_signin_orgs, MAX_USERS, pattern)
    return {"users": [
        {"userId": str(r["id"]), "email": r["email"], "fullName": r["full_name"],
         "organizationName": r["organization_name"], "role": r["role"]}
        for r in rows
    ]}


@router.post("/sign-in")
async def dev_sign_in(body: SignInBody, settings: DevSettings, db: Pool) -> dict[str, str]:
    # Only the people the sign-in page offers; any other address is "not found".
    user_id = await db.fetchval(_BY_EMAIL, body.email.strip(), settings.spotter_dev_signin_orgs)
    if user_id is None:
        raise SpotterError(ErrorCode.NOT_FOUND, "No demo user has that email.")
    return {"token": issue_dev_token(settings, str(user_id)), "userId": str(user_id)}
