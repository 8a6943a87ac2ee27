"""Who is looking at a page: the API key kept in a cookie, and the CSRF token of its forms.

The login form takes a key once and keeps it in ``canon_key``: HttpOnly (no script reads it),
SameSite=Strict (no other site's page sends it), Secure over HTTPS. A key is checked exactly as
the API checks a bearer key (``Keys.check``): a revoked key stops working within its TTL.

Every state-changing form carries ``csrf``: an HMAC of the page's key, so it is the same on
every replica, changes with the key, and no page that lacks the key can compute it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import quote

from fastapi import Request

from canon_ledger.domain.api_key import Principal
from canon_ledger.infrastructure.http.auth import OPEN
from canon_ledger.infrastructure.http.problems import Problem

COOKIE = "canon_key"
MAX_AGE = 12 * 3600  # seconds a login lasts
MAX_TOKEN = 200  # as the bearer header's bound
_OPEN = secrets.token_hex(20)  # what ``--open`` pages (no cookie) sign their forms with, per process


class LoginRequired(Exception):
    """No key, or one that no longer works: the page answers with a redirect to the login."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


def csrf_token(token: str) -> str:
    return hmac.new(token.encode(), b"canon-ledger csrf v1", hashlib.sha256).hexdigest()[:40]


def login_url(request: Request) -> str:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return "/login?next=" + quote(target, safe="")


def safe_next(target: str | None) -> str:
    """Only a path on this server: never another site (``//host``, ``https://...``)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def cookie_token(request: Request) -> str | None:
    token = request.cookies.get(COOKIE)
    return token if token and len(token) <= MAX_TOKEN else None


def viewer(request: Request) -> Principal:
    """The key behind the page's cookie (``canon serve --open``: the open principal), else
    ``LoginRequired``."""
    ctx = request.app.state.ctx
    token = cookie_token(request)
    if token is None:
        if ctx.open_access:
            return OPEN
        raise LoginRequired(login_url(request))
    principal = ctx.keys.check(token)
    if principal is None:
        raise LoginRequired(login_url(request))
    return principal


def page_csrf(request: Request) -> str:
    """The CSRF token the page's forms carry (with no cookie, under ``--open``: this
    process's own)."""
    return csrf_token(cookie_token(request) or _OPEN)


def check_csrf(request: Request, sent: str | None) -> None:
    """403 unless the form's ``csrf`` is the one of the key in the cookie."""
    expected = page_csrf(request)
    if not sent or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise Problem(403, "csrf_failed", "the form's CSRF token is missing or not this login's: reload the page")
