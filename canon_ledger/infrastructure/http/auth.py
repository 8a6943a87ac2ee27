"""Bearer keys at the door: who is calling (401 if nobody), and, for a route, may they
(``needs``: 403, by ``application.access.require``). What a known caller may see and do is
``application.access``'s, the same for every door."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from canon_ledger.application.access import require
from canon_ledger.domain.api_key import Principal
from canon_ledger.infrastructure.http.problems import Problem

OPEN = Principal("open-access", "admin")  # ``canon serve --open`` on loopback only


def _token(request: Request) -> str | None:
    """The bearer token the request sends; None on a server that takes no keys (``--open``)
    when it sends none; else 401."""
    header = request.headers.get("authorization")
    if header is None and request.app.state.ctx.open_access:
        return None
    if header is None:
        raise Problem(401, "unauthenticated", "send an API key: Authorization: Bearer <token> (canon key create)")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 200:
        raise Problem(401, "unauthenticated", "the Authorization header must be: Bearer <token>")
    return token


def _checked(principal: Principal | None) -> Principal:
    if principal is None:
        raise Problem(401, "invalid_key", "the key is unknown or revoked")
    return principal


def key_principal(request: Request) -> Principal:
    """The caller's principal (401 if nobody, or a key unknown or revoked). It may read the
    store: call it in a worker thread."""
    token = _token(request)
    return OPEN if token is None else _checked(request.app.state.ctx.keys.check(token))


async def caller(request: Request) -> Principal:
    """``key_principal``: on the event loop when the key's check is remembered (``Keys.
    remembered``, no I/O), else in a worker thread."""
    token = _token(request)
    if token is None:
        return OPEN
    keys = request.app.state.ctx.keys
    known = keys.remembered(token)
    return _checked(known[0] if known is not None else await run_in_threadpool(keys.check, token))


async def optional_caller(request: Request) -> Principal | None:
    """``caller`` for a request that sends an ``Authorization`` header (a bad key is still 401),
    or on a server that takes no keys (``--open``); None for one that sends none: for a route
    that answers strangers too, with less (``/readyz``)."""
    if request.headers.get("authorization") is None and not request.app.state.ctx.open_access:
        return None
    return await caller(request)


def needs(scope: str, *, every_story: bool = False) -> Callable[..., Awaitable[Principal]]:
    """A key of ``scope`` or above; with ``every_story``, one not limited to stories (for what
    changes the whole store: rebuilds, compiles, keys; and for its store-wide figures: metrics,
    the quota, a rebuild's progress)."""

    async def check(principal: Principal = Depends(caller)) -> Principal:
        return require(principal, scope, every_story=every_story)

    check.__name__ = f"needs_{scope}"
    return check
