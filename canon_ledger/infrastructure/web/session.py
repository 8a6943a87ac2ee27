"""Who is looking at a page: the login session in a cookie, and the CSRF token of its forms.

The login form takes a key once and opens a session (``Keys.open_session``): a random id,
kept in the ``canon_session`` cookie: HttpOnly (no script reads it), SameSite=Strict (no
other site's page sends it), Secure over HTTPS. The cookie never holds the key's token, and
the log holds neither: a ``ViewerSession`` event maps the id's SHA-256 to the key's token
hash, with an expiry (``MAX_AGE``). Since the session is in the log, every replica of
``canon serve`` on the same store knows it. A page resolves session -> key -> principal
(``Keys.session_principal``); logging out ends the session with an event, so the same cookie
replayed afterwards is sent to the login page, and a revoked key ends its sessions too, both
within ``CHECK_TTL`` on other replicas (at once on the one that did it).

Logging in must come from this server's own page (``same_origin``): a cross-site form would
otherwise log the browser into another person's key (login CSRF).

Every state-changing form carries ``csrf``: an HMAC of the page's session id, so it is the
same on every replica, changes with each login, and no page that lacks the cookie can compute it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import quote, urlsplit

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from canon_ledger.domain.api_key import Principal
from canon_ledger.infrastructure.http.auth import OPEN
from canon_ledger.infrastructure.http.problems import Problem

COOKIE = "canon_session"
OLD_COOKIE = "canon_key"  # held the key's token itself, before sessions: cleared on login and logout
MAX_AGE = 12 * 3600  # seconds a login lasts
MAX_TOKEN = 200  # as the bearer header's bound
MAX_SESSION = 64  # characters of a session id (``secrets.token_urlsafe(32)``: 43)
_OPEN = secrets.token_hex(20)  # what ``--open`` pages (no cookie) sign their forms with, per process
_PORTS = {"http": 80, "https": 443}


class LoginRequired(Exception):
    """No session, or one that no longer works: the page answers with a redirect to the login."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


def csrf_token(session_id: str) -> str:
    return hmac.new(session_id.encode(), b"canon-ledger csrf v2", hashlib.sha256).hexdigest()[:40]


def login_url(request: Request) -> str:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return "/login?next=" + quote(target, safe="")


def safe_next(target: str | None) -> str:
    """Only a path on this server: never another site (``//host``, ``https://...``)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an absolute http(s) URL, else None (``null``, a path, junk)."""
    try:
        parts = urlsplit(url.strip())
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:
        return None
    if scheme not in _PORTS or not host:
        return None
    return scheme, host.lower(), port or _PORTS[scheme]


def same_origin(request: Request) -> bool:
    """Does this request come from this server's own pages, as far as the browser says?

    Refused: ``Sec-Fetch-Site: cross-site``; an ``Origin`` that is not this server's (its
    scheme and ``Host``, as the request reached it); with no ``Origin``, a ``Referer`` of another
    origin. A request with none of these (curl, a script) is not a browser's cross-site form."""
    if request.headers.get("sec-fetch-site", "").strip().lower() == "cross-site":
        return False
    own = _origin(f"{request.url.scheme}://{request.url.netloc}")
    origin = request.headers.get("origin")
    if origin is not None:
        return own is not None and _origin(origin) == own
    referer = request.headers.get("referer")
    if referer:
        return own is not None and _origin(referer) == own
    return True


def cookie_session(request: Request) -> str | None:
    session_id = request.cookies.get(COOKIE)
    return session_id if session_id and len(session_id) <= MAX_SESSION else None


async def viewer(request: Request) -> Principal:
    """The key behind the page's session (``canon serve --open``, no cookie: the open
    principal), else ``LoginRequired``. On the event loop when the session and its key's check
    are remembered (``Keys.remembered_session``), else read in a worker thread."""
    ctx = request.app.state.ctx
    session_id = cookie_session(request)
    if session_id is None:
        if ctx.open_access:
            return OPEN
        raise LoginRequired(login_url(request))
    known = ctx.keys.remembered_session(session_id)
    principal = known[0] if known is not None else await run_in_threadpool(ctx.keys.session_principal, session_id)
    if principal is None:
        raise LoginRequired(login_url(request))
    return principal


def page_csrf(request: Request) -> str:
    """The CSRF token the page's forms carry (with no cookie, under ``--open``: this
    process's own)."""
    return csrf_token(cookie_session(request) or _OPEN)


def check_csrf(request: Request, sent: str | None) -> None:
    """403 unless the form's ``csrf`` is the one of the session in the cookie."""
    expected = page_csrf(request)
    if not sent or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise Problem(403, "csrf_failed", "the form's CSRF token is missing or not this login's: reload the page")
