"""``/docs``: Swagger UI over ``/openapi.json``, served from this server alone.

FastAPI's own ``/docs`` loads Swagger UI from a CDN (and its favicon from FastAPI's site), so it
is blank on a machine with no internet. Here the JS and CSS are the files the
``fastapi-swagger`` package ships (its Swagger UI 5 build; nothing else of it is used), served
from ``/docs/assets/``, and the page has no inline script: its settings are in a data attribute
read by ``/docs/init.js``. So the page can send a Content-Security-Policy as strict as the
viewer's, except that it runs this server's own scripts, and nothing it loads leaves the server
(the online validator badge is off). No ``/redoc`` and no OAuth2 redirect page: ReDoc is not
shipped, and the API's keys are bearer tokens (``canon key create``), not an OAuth2 flow.
"""

from __future__ import annotations

from html import escape
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

PATH = "/docs"
ASSETS = f"{PATH}/assets"
SHIPPED = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")  # fastapi_swagger/resources/
HEADERS = {"Cache-Control": "no-cache", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin",
           # Swagger UI sets styles through the DOM (allowed by style-src 'self'), its icons are
           # data: URIs, and "Try it out" calls this server (connect-src 'self').
           "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                                      "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                                      "form-action 'none'; base-uri 'none'"}
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - API</title>
<link rel="stylesheet" href="{root}{assets}/swagger-ui.css">
<link rel="icon" type="image/png" href="{root}{assets}/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{root}{openapi}"></div>
<script src="{root}{assets}/swagger-ui-bundle.js"></script>
<script src="{root}{path}/init.js"></script>
</body>
</html>
"""
# FastAPI's own Swagger UI settings, with the validator badge (a request to swagger.io) off.
INIT = b"""window.ui = SwaggerUIBundle({
  url: document.getElementById("swagger-ui").dataset.openapiUrl,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""


def shipped() -> Path:
    """The folder of the Swagger UI files ``fastapi-swagger`` ships (an installed package's own
    files, never a download)."""
    return Path(str(files("fastapi_swagger") / "resources"))


class _Assets(StaticFiles):
    """The shipped files, and nothing else of their folder (it also holds an ``__init__.py``)."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        if path not in SHIPPED:
            raise HTTPException(404, "no such asset of the API's docs")
        response = await super().get_response(path, scope)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "public, max-age=86400"
        return response


def install(app: FastAPI) -> None:
    """``/docs``, ``/docs/init.js`` and ``/docs/assets/*`` (create the app with ``docs_url=None``)."""
    assert app.docs_url is None and app.openapi_url is not None

    @app.get(PATH, include_in_schema=False)
    def docs(request: Request) -> Response:
        root = str(request.scope.get("root_path", "")).rstrip("/")
        values: dict[str, Any] = {"title": app.title, "root": root, "assets": ASSETS, "path": PATH,
                                  "openapi": app.openapi_url}
        body = PAGE.format(**{k: escape(str(v)) for k, v in values.items()})
        return Response(body, media_type="text/html; charset=utf-8", headers=HEADERS)

    @app.get(f"{PATH}/init.js", include_in_schema=False)
    def init() -> Response:
        return Response(INIT, media_type="text/javascript; charset=utf-8",
                        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})

    app.mount(ASSETS, _Assets(directory=shipped()), name="docs-assets")
