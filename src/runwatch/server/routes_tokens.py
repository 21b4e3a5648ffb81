"""Token routes: list, create and revoke a project's API tokens (admin of that project).

The secret of a new token is in the answer to its creation and nowhere else, ever.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection

from runwatch.server import scopes
from runwatch.server.errors import ApiError, not_found
from runwatch.server.schemas import TokenAnswer, TokenCreated, TokenList, documented
from runwatch.server.state import ServerState, connection, state
from runwatch.store import tokens

router = APIRouter(tags=["tokens"])


class TokenRequest(BaseModel):
    """A token to make: its project, right and a name saying who or what uses it."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(..., min_length=1, max_length=128)
    right: Literal["read", "write", "admin"] = "read"
    name: str = Field(..., min_length=1, max_length=128)


class NoBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


@router.get("/api/tokens", **documented(TokenList, "the tokens"))
def list_tokens(request: Request, conn: Connection = Depends(connection)) -> dict[str, Any]:
    """The tokens of the projects this request administers (never their secrets), newest
    first, revoked ones too."""
    sc = scopes.scope_of(request)
    for project in sorted(sc.projects) if sc.projects is not None else [None]:
        scopes.require(request, project, "admin")
    return {"ok": True, "tokens": [t.json() for t in tokens.list_tokens(conn, sc.projects)]}


@router.post("/api/tokens", status_code=201,
             **documented(TokenCreated, "the new token and its secret", status=201))
def create_token(request: Request, body: TokenRequest, st: ServerState = Depends(state)
                 ) -> dict[str, Any]:
    """Make a token of `project`; the answer's `secret` is shown this once."""
    scopes.require(request, body.project, "admin")
    try:
        with st.engine.begin() as conn:
            made, secret = tokens.create(conn, body.project, body.right, body.name,
                                         scopes.scope_of(request).who)
    except tokens.TokenError as exc:
        raise ApiError(422, str(exc)) from None
    return {"ok": True, "token": made.json(), "secret": secret}


@router.post("/api/tokens/{token_id}/revoke", **documented(TokenAnswer, "the revoked token"))
def revoke_token(request: Request, token_id: str, _body: NoBody | None = None,
                 st: ServerState = Depends(state)) -> dict[str, Any]:
    """Revoke a token: it is refused from the next request on."""
    with st.engine.begin() as conn:
        found = tokens.get(conn, token_id)
        if found is None or not scopes.visible(request, found.project):
            raise not_found(f"no token has the id {token_id!r}; list them with GET /api/tokens")
        scopes.require(request, found.project, "admin")
        return {"ok": True, "token": tokens.revoke(conn, token_id).json()}
