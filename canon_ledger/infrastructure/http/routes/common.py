"""What every route module uses: the server's context, and a JSON answer."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.responses import Response

from canon_ledger.infrastructure.http.context import ServerContext
from canon_ledger.infrastructure.http.problems import Problem
from canon_ledger.infrastructure.jsonout import dumps


def ctx(request: Request) -> ServerContext:
    return request.app.state.ctx


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Strict JSON (``infrastructure.jsonout``), the same as the CLI's ``--format json``."""
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)


async def bounded_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) past ``limit`` bytes: by its Content-Length before it
    is read, and by what arrives."""
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise Problem(413, "body_too_large", f"a request body is at most {limit:,} bytes")
    body = await request.body()
    if len(body) > limit:
        raise Problem(413, "body_too_large", f"a request body is at most {limit:,} bytes")
    return body
