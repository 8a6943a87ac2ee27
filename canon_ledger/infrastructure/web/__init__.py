"""The web viewer of ``canon serve``: the context viewer, the canon browser and the review queue
(``pages``), logged in by cookie (``session``), with its CSS served from this package."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse
from starlette.staticfiles import StaticFiles

from canon_ledger.infrastructure.web.pages import HERE, error_page, is_page, router
from canon_ledger.infrastructure.web.session import LoginRequired

__all__ = ["error_page", "install", "is_page"]


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.exception_handler(LoginRequired)
    async def _login(_: Request, e: LoginRequired) -> RedirectResponse:
        return RedirectResponse(e.target, 303)
