"""``/mcp`` in ``canon serve``: the MCP server over streamable HTTP, behind the API's keys.

The door authenticates every request exactly as the API's routes do (``auth.caller``: 401
problem+json without a valid bearer key) before the SDK sees a byte, reads the body only then
(bounded: 413 problem+json past ``MAX_BODY``), and hands the caller to the tools in the
request's ASGI state; each tool then checks its own scope and the key's stories. Stateless
transport with JSON responses: no session lives in the process, so any ``canon serve``
replica answers any request (docs/scaling.md).

A client without a key learns how to get one from the 401 itself: its ``WWW-Authenticate``
names this server's OAuth protected-resource metadata (RFC 9728, ``METADATA_PATHS``), which
lists no authorization server, since keys are made with ``canon key create``, not by an OAuth
flow. (The SDK's ``ProtectedResourceMetadata`` requires at least one authorization server, so
the document is built here.)

DNS-rebinding protection (the SDK's Host/Origin allow-list) is off: it guards servers that
trust ambient credentials (cookies, loopback), while this door takes only an Authorization
header, which a rebound page cannot send for the user.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from canon_ledger.infrastructure.http.auth import caller
from canon_ledger.infrastructure.http.door import body_limit, bounded_body
from canon_ledger.infrastructure.http.problems import Problem, problem_response
from canon_ledger.infrastructure.jsonout import dumps
from canon_ledger.infrastructure.mcp.server import PRINCIPAL, build_server
from canon_ledger.infrastructure.mcp.tools import AgentTools

PATH = "/mcp"
WELL_KNOWN = "/.well-known/oauth-protected-resource"
METADATA_PATHS = (WELL_KNOWN, WELL_KNOWN + PATH)  # RFC 9728 3.1: the host's, and the resource path's
KEYS = ("This server takes API keys, not OAuth: send Authorization: Bearer <token>, with a token made on the "
        "server by `canon key create --scope worker|author|admin [--story S]` (printed once). No authorization "
        "server issues them.")
MAX_BODY = body_limit("POST", PATH)  # the door's limit for /mcp


class McpDoor:
    """The ASGI app mounted at ``/mcp``. ``running()`` is entered in the app's lifespan."""

    def __init__(self) -> None:
        self._tools: AgentTools | None = None
        self.server = build_server(self.tools)
        self.server.streamable_http_app(  # makes the session manager; its routes are not used
            stateless_http=True, json_response=True, max_request_body_size=MAX_BODY,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))

    def tools(self) -> AgentTools:
        if self._tools is None:
            raise Problem(503, "starting", "the server is starting")
        return self._tools

    @asynccontextmanager
    async def running(self, context: Any) -> AsyncIterator[None]:
        self._tools = AgentTools(context)
        async with self.server.session_manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            principal = await caller(request)  # a check not remembered reads the store in a worker thread
            body = await bounded_body(request) if scope["method"] == "POST" else b""
        except Problem as e:
            headers = {"WWW-Authenticate": challenge(request, e.code)} if e.status == 401 else None
            await problem_response(e.status, e.code, e.detail, e.field, headers)(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL] = principal
        await self.server.session_manager.handle_request(scope, _replay(body, receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body already read (bounded, after the key was checked),
    then whatever the connection says next (a disconnect)."""
    given = [False]

    async def replay() -> Any:
        if given[0]:
            return await receive()
        given[0] = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _base(request: Request) -> str:
    """This server's URL as the client reached it (scheme, host, root path)."""
    return str(request.base_url).rstrip("/")


def challenge(request: Request, code: str) -> str:
    """The ``WWW-Authenticate`` of a 401 from ``/mcp``: Bearer, where the metadata is (RFC 9728
    5.1), and ``invalid_token`` (RFC 6750) for a key that was sent but is unknown or revoked."""
    error = 'error="invalid_token", ' if code == "invalid_key" else ""
    url = f"{_base(request)}{WELL_KNOWN}".replace("\\", "\\\\").replace('"', '\\"')  # a quoted-string
    return f'Bearer {error}resource_metadata="{url}"'


async def protected_resource(request: Request) -> Response:
    """``GET /.well-known/oauth-protected-resource[/mcp]``: RFC 9728 metadata of ``/mcp``,
    without a key and without the store. Any origin may read it (a browser-based MCP client
    does, before it has a key)."""
    cors = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, OPTIONS",
            "Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "86400"}
    if request.method == "OPTIONS":
        return Response(status_code=204, headers=cors)
    base = _base(request)
    body = {"resource": base + PATH, "bearer_methods_supported": ["header"], "resource_name": "Canon Ledger",
            "description": KEYS}
    return Response(dumps(body), media_type="application/json", headers={**cors, "Cache-Control": "max-age=3600"})
