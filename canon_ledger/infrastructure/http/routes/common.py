"""What every route module uses: the server's context, and a JSON answer."""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from starlette.responses import Response

from canon_ledger.infrastructure.http.context import ServerContext
from canon_ledger.infrastructure.http.door import body_limit, too_large
from canon_ledger.infrastructure.http.problems import Problem
from canon_ledger.infrastructure.jsonout import dumps


def ctx(request: Request) -> ServerContext:
    return request.app.state.ctx


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Strict JSON (``infrastructure.jsonout``), the same as the CLI's ``--format json``."""
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)


async def bounded_body(request: Request, limit: int | None = None) -> bytes:
    """The request body, refused (413) past ``limit`` bytes (default: the route's, ``door.
    body_limit``): by its Content-Length before it is read, and by what arrives. A route that
    needs a key calls this after its key dependency ran, so no stranger's body is read."""
    limit = body_limit(request.method, request.url.path) if limit is None else limit
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise too_large(limit)
    body = await request.body()
    if len(body) > limit:
        raise too_large(limit)
    return body


Model = TypeVar("Model")


async def json_body(request: Request, adapter: TypeAdapter[Model]) -> Model:
    """The body (``bounded_body``) read as ``adapter``'s type; 422 as FastAPI answers a body it
    validated itself."""
    body = await bounded_body(request)
    try:
        return adapter.validate_json(body)
    except ValidationError as e:
        raise RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in e.errors()]) from None
