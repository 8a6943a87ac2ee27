"""The door: what every HTTP request is checked for before it is routed, authenticated or a
byte of its body is read. Pure ASGI, outermost, so that no client can make the server do
work it was not asked to do by a caller it knows.

In order:

1. ``--open`` only: the ``Host`` must be a loopback name and an ``Origin``, if sent, a
   loopback origin (403 ``host_not_allowed`` / ``cross_origin``): a page of another site,
   DNS-rebound to 127.0.0.1 or not, cannot drive a server that takes no keys.
2. A NUL in the path is 404 (nothing can be named so), in the query string 422: neither store
   can hold it, so it never reaches one.
3. The store gate (``StoreGate``): while the store is known to be down, a request that needs it
   is answered 503 ``store_unavailable`` at once, with ``Retry-After`` (``/readyz`` asked
   without a key: ``{"status": "not ready"}``, all a stranger is told); one request a
   ``PROBE_EVERY`` goes through to find out whether it is back.
4. A JSON route (``JSON_ROUTES``) takes only ``application/json`` (415 otherwise): a page of
   another site can send a "simple" cross-site POST, never one of that type without CORS.
5. The body: refused (413) by its ``Content-Length`` before it is read when larger than the
   route's limit (``body_limit``), cut off at the limit while it streams (chunked), and ended
   (408) when the client sends nothing for ``BODY_IDLE`` seconds or takes longer than
   ``BODY_TOTAL`` in all.

A route that needs a key reads its body only after the key is checked (the routes that take
a body read it themselves, ``bounded_body``), so an unauthenticated body costs
at most its route's limit and is mostly never read. Header timeouts and keep-alive bounds live
in the HTTP protocol (``infrastructure.http.protocol``).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from contextvars import ContextVar

import anyio
from starlette.requests import Request
from starlette.responses import Response

from canon_ledger.infrastructure.http.problems import Problem, problem_response
from canon_ledger.infrastructure.http.protocol import seconds

KIB, MIB = 1024, 1024 * 1024
DEFAULT_BODY = 64 * KIB  # forms, keys, and any route not listed in ``BODY_LIMITS``
BODY_LIMITS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("POST", re.compile(r"^/v1/commands$"), 64 * MIB),
    # 1,000 documents of 5 MiB characters fit no request: ingest big collections a few at a time
    ("POST", re.compile(r"^/v1/collections/[^/]+/documents$"), 64 * MIB),
    ("POST", re.compile(r"^/mcp/?$"), 8 * MIB),  # a propose_canon near its bounds fits many times over
)
JSON_ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("POST", re.compile(r"^/v1/commands$")),
    ("POST", re.compile(r"^/v1/keys$")),
    ("POST", re.compile(r"^/v1/collections/[^/]+/documents$")),
    ("POST", re.compile(r"^/mcp/?$")),
)
BODY_IDLE = seconds("CANON_BODY_TIMEOUT", 15.0)  # seconds a body may go without a byte
BODY_TOTAL = max(120.0, BODY_IDLE)  # seconds a whole body may take
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
# What answers without the store: liveness, the API's own description (/docs and its assets),
# the CSS, the login form, /mcp's protected-resource metadata.
STORELESS = re.compile(r"^/(healthz|docs(/.*)?|openapi\.json|static/.*|favicon\.ico|"
                       r"\.well-known/oauth-protected-resource(/mcp)?)$")
READYZ = "/readyz"  # asked with no key while the store is down: {"status": "not ready"}, as the route says
RETRY_AFTER = 1  # seconds, in the 503 while the store is down
PROBE: ContextVar[bool] = ContextVar("canon_store_probe", default=False)  # this request is the gate's probe


def body_limit(method: str, path: str) -> int:
    for m, pattern, limit in BODY_LIMITS:
        if m == method and pattern.match(path):
            return limit
    return DEFAULT_BODY


def is_json_route(method: str, path: str) -> bool:
    return any(m == method and pattern.match(path) for m, pattern in JSON_ROUTES)


def too_large(limit: int) -> Problem:
    return Problem(413, "body_too_large", f"a request body here is at most {limit:,} bytes")


async def bounded_body(request: Request, limit: int | None = None) -> bytes:
    """The request body, refused (413) past ``limit`` bytes (default: the route's,
    ``body_limit``): by its Content-Length before it is read, and by what arrives. A route that
    needs a key calls this after its key dependency ran, so no stranger's body is read."""
    limit = body_limit(request.method, request.url.path) if limit is None else limit
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise too_large(limit)
    body = await request.body()
    if len(body) > limit:
        raise too_large(limit)
    return body


class BodyTimedOut(Problem):
    def __init__(self, why: str) -> None:
        super().__init__(408, "body_timeout", why)


class StoreGate:
    """Whether requests that need the store may go to it.

    Closed (the store answers) until a fault of the store is seen (``failed``: a request's, the
    pool's, or the log listener's); then open: every request that needs the store is answered
    503 at once, and the event store's pool refuses new connections at once (``fail_fast``),
    so requests already running fail within the library's retries (10 x 0.2 s) instead of
    waiting for its pool 10 times. It closes again with no restart and no thread of its own:
    one request each ``PROBE_EVERY`` seconds goes through (its pool waits as usual, ``PROBE``),
    and the gate closes when one comes back without a store fault. With a ``listener``
    (PostgreSQL: the log listener, which reconnects every second) a probe goes only while the
    listener is connected, and its reconnecting closes the gate at once (``recovered``).
    """

    PROBE_EVERY = 1.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._down = False
        self._next_probe = 0.0
        self._faults = 0  # store faults seen: a probe that saw none closes the gate
        self.listener: Callable[[], bool] | None = None  # is the log listener connected?

    @property
    def down(self) -> bool:
        return self._down

    def failed(self) -> None:
        with self._lock:
            self._faults += 1
            if not self._down:
                self._down = True
                self._next_probe = self._clock() + self.PROBE_EVERY

    def recovered(self) -> None:
        with self._lock:
            self._down = False

    def admit(self) -> int | None:
        """None: answer 503 now. Else a ticket to hand to ``done`` when the request ends (a
        probe's decides whether the store is back)."""
        with self._lock:
            if not self._down:
                return -1
            now = self._clock()
            if now < self._next_probe or (self.listener is not None and not self.listener()):
                return None
            self._next_probe = now + self.PROBE_EVERY
            return self._faults

    def done(self, ticket: int) -> None:
        if ticket < 0:
            return
        with self._lock:
            if self._down and self._faults == ticket:
                self._down = False

    def fail_fast(self, pool: Any) -> None:
        """Make ``pool`` (psycopg_pool's, the event store's) refuse at once while the gate is
        open, and open the gate when it times out waiting for a connection."""
        from psycopg_pool import PoolTimeout

        wait = pool.getconn

        def getconn(timeout: float | None = None) -> Any:
            if self._down and not PROBE.get():
                raise PoolTimeout("the store is unavailable (a connection to it failed just now)")
            try:
                return wait(timeout)
            except PoolTimeout:
                self.failed()
                raise

        pool.getconn = getconn


def _host_name(value: str) -> str:
    """The host of a ``Host`` header or an origin's netloc, without its port or brackets."""
    host = value.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def loopback_origin(origin: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and _host_name(parts.netloc) in LOOPBACK_NAMES


class Door:
    """The ASGI middleware of the checks above (``open_access``: ``canon serve --open``)."""

    def __init__(self, app: Any, *, open_access: bool = False) -> None:
        self.app = app
        self.open_access = open_access

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        headers = {k: v for k, v in scope["headers"] if k in (b"host", b"origin", b"content-length", b"content-type",
                                                               b"transfer-encoding", b"authorization")}
        refused = self._refusal(method, path, scope["query_string"], headers)
        if refused is not None:
            await self._answer(refused, scope, receive, send)
            return
        gate: StoreGate | None = getattr(getattr(scope["app"].state, "ctx", None), "gate", None) \
            if "app" in scope else None
        ticket = -1
        if gate is not None and not STORELESS.match(path):
            admitted = gate.admit()
            if admitted is None and path == READYZ and b"authorization" not in headers:
                await Response(b'{"status":"not ready"}', 503, {"Retry-After": str(RETRY_AFTER)},
                               "application/json")(scope, receive, send)
                return
            if admitted is None:
                await problem_response(503, "store_unavailable", "the store is unavailable; retry shortly",
                                       headers={"Retry-After": str(RETRY_AFTER)})(scope, receive, send)
                return
            ticket = admitted
        limit = body_limit(method, path)
        started = [False]

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                started[0] = True
            await send(message)

        probing = PROBE.set(True) if ticket >= 0 else None  # seen by the pool's threads (context is copied)
        try:
            await self.app(scope, _bounded(receive, limit), sending)
        except Problem as e:  # a body refused while it streamed, where no route's handler met it
            if started[0]:
                raise
            await self._answer(e, scope, receive, send)
        finally:
            if probing is not None:
                PROBE.reset(probing)
            if gate is not None:
                gate.done(ticket)

    def _refusal(self, method: str, path: str, query: bytes, headers: dict[bytes, bytes]) -> Problem | None:
        if self.open_access:
            host = headers.get(b"host", b"").decode("latin-1")
            if _host_name(host) not in LOOPBACK_NAMES:
                return Problem(403, "host_not_allowed", "a server run with --open answers only to a loopback "
                                                        "Host (localhost, 127.0.0.1, [::1])")
            origin = headers.get(b"origin")
            if origin is not None and not loopback_origin(origin.decode("latin-1")):
                return Problem(403, "cross_origin", "a server run with --open answers no page of another origin")
        if "\x00" in path:
            return Problem(404, "not_found", "no resource has a NUL character in its path")
        if b"\x00" in query or b"%00" in query.lower():
            return Problem(422, "invalid_request", "a query value holds a NUL character, which nothing stores")
        size = headers.get(b"content-length")
        has_body = b"transfer-encoding" in headers or (size is not None and size.strip() not in (b"", b"0"))
        if is_json_route(method, path) and has_body:
            media = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
            if media != b"application/json" and not (media.startswith(b"application/") and media.endswith(b"+json")):
                return Problem(415, "unsupported_media_type", "send the body as Content-Type: application/json",
                               "Content-Type")
        limit = body_limit(method, path)
        if size is not None and (not size.strip().isdigit() or int(size) > limit):
            return too_large(limit) if size.strip().isdigit() else \
                Problem(400, "invalid_request", "Content-Length is not a number")
        return None

    @staticmethod
    async def _answer(problem: Problem, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = {"Connection": "close"} if problem.status in (408, 413) else None
        await problem_response(problem.status, problem.code, problem.detail, problem.field, headers,
                               **problem.extra)(scope, receive, send)


def _bounded(receive: Any, limit: int) -> Any:
    """``receive``, refusing (``Problem`` 413) a body past ``limit`` bytes and ending one that
    stalls (408)."""
    seen = [0]
    began = time.monotonic()
    done = [False]

    async def bounded() -> Any:
        if done[0]:
            return await receive()
        left = BODY_TOTAL - (time.monotonic() - began)
        if left <= 0:
            raise BodyTimedOut(f"the request body took longer than {BODY_TOTAL:.0f} s")
        try:
            with anyio.fail_after(min(BODY_IDLE, left)):
                message = await receive()
        except TimeoutError:
            raise BodyTimedOut(f"the request body stalled (nothing for {BODY_IDLE:.0f} s)") from None
        if message["type"] == "http.request":
            seen[0] += len(message.get("body", b""))
            if seen[0] > limit:
                raise too_large(limit)
            if not message.get("more_body", False):
                done[0] = True
        else:
            done[0] = True
        return message

    return bounded
