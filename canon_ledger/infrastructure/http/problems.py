"""Errors as ``application/problem+json`` (RFC 9457), carrying the CLI's ``code`` and ``field``.

No stack trace, SQL, token or key ever reaches a client: unexpected errors are logged here
with their trace and answered as ``internal_error`` with a reference to that log line.
"""

from __future__ import annotations

import html
import logging
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import HTMLResponse, Response

from canon_ledger.application.knowledge.ports import ProviderError
from canon_ledger.domain.errors import CanonError, Forbidden, InvalidCommand, NotFound
from canon_ledger.infrastructure.jsonout import dumps
from canon_ledger.infrastructure.store_faults import is_store_fault, scrubbed

log = logging.getLogger("canon.http")
MEDIA_TYPE = "application/problem+json"

_TITLES = {400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found", 405: "Method not allowed",
           406: "Not acceptable", 409: "Conflict", 413: "Content too large", 415: "Unsupported media type",
           422: "Unprocessable content", 500: "Internal server error", 503: "Service unavailable"}


class Problem(Exception):
    def __init__(self, status: int, code: str, detail: str, field: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field
        self.extra = extra

    @classmethod
    def of(cls, error: CanonError, status: int | None = None) -> Problem:
        return cls(status or status_of(error), error.code, error.message, error.field)


def status_of(error: CanonError) -> int:
    """404 for what does not exist, 403 for what the key may not do, 422 for what cannot be
    read, 409 for a rule's refusal."""
    if isinstance(error, NotFound):
        return 404
    if isinstance(error, Forbidden):
        return 403
    if isinstance(error, InvalidCommand) or error.code == "position_beyond_log":
        return 422
    if error.code in ("read_model_behind", "read_model_outdated"):
        return 503
    return 409


def problem_response(status: int, code: str, detail: str, field: str | None = None,
                     headers: dict[str, str] | None = None, **extra: Any) -> Response:
    body = {"type": f"urn:canon-ledger:problem:{code}", "title": _TITLES.get(status, "Error"), "status": status,
            "detail": detail, "code": code, "field": field, **extra}
    return Response(dumps(body), status_code=status, media_type=MEDIA_TYPE, headers=headers)


PageError = Callable[[Request, int, str, str, "str | None"], Response]


def install(app: FastAPI, pages: tuple[Callable[[str], bool], PageError] | None = None) -> None:
    """``pages``: (is this path a page?, how a page shows an error): the viewer's errors are
    HTML with the same status and code; the API's stay problem+json. ``unexpected`` reads them
    from ``app.state.pages`` (an error that escaped a page is answered as a page too)."""
    app.state.pages = pages

    def answer(request: Request, status: int, code: str, detail: str, field: str | None = None,
               headers: dict[str, str] | None = None, **extra: Any) -> Response:
        return _answer(request, pages, status, code, detail, field, headers, **extra)

    @app.exception_handler(Problem)
    async def _problem(request: Request, e: Problem) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
        return answer(request, e.status, e.code, e.detail, e.field, headers, **e.extra)

    @app.exception_handler(CanonError)
    async def _canon(request: Request, e: CanonError) -> Response:
        return answer(request, status_of(e), e.code, e.message, e.field)

    @app.exception_handler(ProviderError)
    async def _provider(request: Request, e: ProviderError) -> Response:
        # The provider asked for is not configured here (no key): the request names what this
        # server cannot do. Provider messages are scrubbed of keys.
        return answer(request, 422, "provider_unavailable", str(e), "provider")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> Response:
        errors = e.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("query", "path", "body", "header")]
        field = ".".join(loc) or None
        detail = "; ".join(f"{'.'.join(str(p) for p in err.get('loc', ())[1:]) or 'request'}: {err.get('msg')}"
                           for err in errors[:5])
        return answer(request, 422, "invalid_field" if field else "invalid_request", detail, field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
        return answer(request, e.status_code, code, str(e.detail), headers=getattr(e, "headers", None))


def unexpected(scope: dict[str, Any], e: Exception) -> Response:
    """The answer to whatever escaped a route (it is logged here, once): 503
    ``store_unavailable`` for a fault of the store, else 500 ``internal_error`` with a
    reference to the log line that has the trace. ``metrics.RequestMiddleware`` calls it in a
    worker thread (the trace is rendered here) and sends it inside Starlette's error
    middleware, so the keep-alive connection survives."""
    if is_store_fault(e):
        state = scope["app"].state
        gate = getattr(getattr(state, "ctx", None), "gate", None)
        if gate is not None:
            gate.failed()  # the door answers the next requests at once until a probe finds it back
        url = getattr(state, "store_url", None)
        log.warning("store unavailable: %s", scrubbed(e, url))
        return _for(scope, 503, "store_unavailable", f"the store is unavailable: {scrubbed(e, url)}",
                    {"Retry-After": "1"})
    ref = uuid.uuid4().hex[:12]
    log.error("internal error %s on %s %s", ref, scope["method"], scope["path"], exc_info=e)
    return _for(scope, 500, "internal_error", f"an internal error occurred (reference {ref} in the server log)")


def _for(scope: dict[str, Any], status: int, code: str, detail: str,
         headers: dict[str, str] | None = None) -> Response:
    """The answer to ``unexpected``'s caller, with the pages ``install`` was given."""
    pages = getattr(getattr(scope.get("app"), "state", None), "pages", None)
    return _answer(Request(scope), pages, status, code, detail, None, headers)


def _answer(request: Request, pages: tuple[Callable[[str], bool], PageError] | None, status: int, code: str,
            detail: str, field: str | None = None, headers: dict[str, str] | None = None, **extra: Any) -> Response:
    """One error's answer: a page of the viewer gets an HTML page with the same status, code and
    headers (the viewer's own error page; a plain one if that cannot render, for the fault may
    be in the templates), every other route problem+json."""
    if pages is None or not pages[0](request.url.path):
        return problem_response(status, code, detail, field, headers, **extra)
    try:
        response = pages[1](request, status, code, detail, field)
    except Exception:  # noqa: BLE001 - the error page itself failed: answer one that cannot
        log.exception("the viewer's error page could not render; answering a plain one")
        response = HTMLResponse(PLAIN_PAGE.format(status=status, title=html.escape(_TITLES.get(status, "Error")),
                                                  code=html.escape(code), detail=html.escape(detail)),
                                status_code=status, headers={"Cache-Control": "no-store"})
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


PLAIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{status} {code}</title></head>
<body><h1>{status} &middot; {title}</h1>
<p class="error" role="alert" data-code="{code}"><code>{code}</code>: {detail}</p>
<p><a href="/">Back to the stories</a></p></body></html>
"""
