"""The HTTP API (``canon serve``): FastAPI, one composition root per process.

``create_app`` does no I/O: the store, read models, tokenizer and embedder are opened in the
lifespan (``ServerContext``), once, and closed at shutdown. Every route authenticates with a
bearer key (``infrastructure.http.auth``) except ``/healthz``, ``/readyz`` (ready or not, and
the detail only with a key), the API's description (``/openapi.json``, ``/docs``: served offline,
``infrastructure.http.docs``), ``/mcp``'s protected-resource metadata and the viewer's login
page and CSS; every error is problem+json (``infrastructure.http.problems``). ``/mcp`` is the
MCP server over streamable HTTP, behind the same keys (``infrastructure.mcp``).
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route

from canon_ledger.domain.commands import COMMAND_ADAPTER
from canon_ledger.infrastructure import web
from canon_ledger.infrastructure.http import docs, problems
from canon_ledger.infrastructure.http.context import ServerContext
from canon_ledger.infrastructure.http.door import Door
from canon_ledger.infrastructure.http.metrics import RequestMiddleware
from canon_ledger.infrastructure.http.routes import admin, commands, knowledge, packets, stories, stream
from canon_ledger.infrastructure.mcp.http import METADATA_PATHS, McpDoor, protected_resource
from canon_ledger.infrastructure.mcp.http import PATH as MCP_PATH

VERSION = "1"
KEYLESS = ("/healthz", "/readyz")  # the API's operations a caller without a key may ask


def create_app(url: str | None = None, *, open_access: bool = False, embedder: Any = None,
               worker: bool = True) -> FastAPI:
    """``worker``: run a projection worker in the server's process (see ``ServerContext``)."""
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        context = await run_in_threadpool(lambda: ServerContext(url, open_access=open_access, embedder=embedder,
                                                                worker=worker))
        app.state.ctx = context
        app.state.metrics = context.metrics
        # What start-up loaded (libraries, the tokenizer, the read models) lives as long as the
        # process: out of the collector's sight, so a full collection on the event loop's thread
        # walks only what requests allocate (tens of ms less per gen-2 pass here).
        gc.collect()
        gc.freeze()
        try:
            async with mcp_door.running(context):
                yield
        finally:
            await run_in_threadpool(context.close)

    app = FastAPI(title="Canon Ledger", version=VERSION, lifespan=lifespan, docs_url=None, redoc_url=None,
                  swagger_ui_oauth2_redirect_url=None,  # /docs is docs.install's: served offline
                  description="Confirmed canon as an append-only event log; token-budgeted context packets built "
                              "only from it. Send `Authorization: Bearer <token>` (`canon key create`).")
    app.state.store_url = url
    problems.install(app, pages=(web.is_page, web.error_page))
    for module in (commands, stream, stories, packets, knowledge, admin):
        app.include_router(module.router)
    web.install(app)
    docs.install(app)
    mcp_door = McpDoor()
    app.router.routes.append(Route(MCP_PATH, endpoint=mcp_door, methods=["GET", "POST", "DELETE"]))
    for path in METADATA_PATHS:
        app.router.routes.append(Route(path, endpoint=protected_resource, methods=["GET", "OPTIONS"]))
    app.add_middleware(RequestMiddleware)
    app.add_middleware(Door, open_access=open_access)  # added last: the outermost, it runs first
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, with ``POST /v1/commands``'s body declared as the command union (the
    same schema ``canon schema`` prints: the route reads the body itself, with the CLI's
    bounds, so that each command gets its own result) and every error as problem+json."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi

    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    union = COMMAND_ADAPTER.json_schema(ref_template="#/components/schemas/{model}")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(union.pop("$defs", {}))
    components["Command"] = union
    command = {"$ref": "#/components/schemas/Command"}
    schema["paths"]["/v1/commands"]["post"]["requestBody"] = {"required": True, "content": {"application/json": {
        "schema": {"oneOf": [command, {"type": "array", "items": command, "minItems": 1,
                                       "maxItems": commands.MAX_BATCH}]}}}}
    for path, adapter in (("/v1/keys", admin.KEY_IN), ("/v1/collections/{collection}/documents",
                                                       knowledge.DOCUMENTS_IN)):
        body = adapter.json_schema(ref_template="#/components/schemas/{model}")
        components.update(body.pop("$defs", {}))
        schema["paths"][path]["post"]["requestBody"] = {"required": True,
                                                        "content": {"application/json": {"schema": body}}}
    components["Problem"] = {"type": "object", "required": ["type", "title", "status", "detail", "code"], "properties": {
        "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
        "detail": {"type": "string"}, "code": {"type": "string"}, "field": {"type": ["string", "null"]}}}
    problem = {"description": "Problem (RFC 9457)",
               "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}}
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            if path in KEYLESS:  # a key is not needed; /readyz takes one for more (a bad one is 401)
                statuses: tuple[str, ...] = ("401",) if path == "/readyz" else ()
                security: list[dict[str, list[str]]] = [{}, {"bearer": []}] if statuses else []
            else:
                statuses, security = ("401", "403", "404", "409", "422"), [{"bearer": []}]
            for status in statuses:
                responses.setdefault(status, problem)
            if security:
                operation["security"] = security
    schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    app.openapi_schema = schema
    return schema
