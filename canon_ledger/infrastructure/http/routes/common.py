"""What every route module answers with: a JSON response, and a JSON body read as a model."""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from starlette.responses import Response

from canon_ledger.infrastructure.http.door import bounded_body
from canon_ledger.infrastructure.jsonout import dumps


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Strict JSON (``infrastructure.jsonout``), the same as the CLI's ``--format json``."""
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)


Model = TypeVar("Model")


async def json_body(request: Request, adapter: TypeAdapter[Model]) -> Model:
    """The body (``door.bounded_body``) read as ``adapter``'s type; 422 as FastAPI answers a
    body it validated itself."""
    body = await bounded_body(request)
    try:
        return adapter.validate_json(body)
    except ValidationError as e:
        raise RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in e.errors()]) from None
