"""What every route module uses: the server's context, and a JSON answer."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.responses import Response

from infrastructure.http.context import ServerContext
from infrastructure.jsonout import dumps


def ctx(request: Request) -> ServerContext:
    return request.app.state.ctx


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Strict JSON (``infrastructure.jsonout``), the same as the CLI's ``--format json``."""
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)
