"""An unexpected error on a viewer page answers an HTML page (issue 38), as the page's other
errors do; the API's routes keep answering problem+json. No trace or internal detail reaches
either. In-process on the real app (``--open``: no login needed) and a real SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from canon_ledger.infrastructure.http.app import create_app
from tests.conftest import initialised


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(initialised(f"sqlite:///{tmp_path / 'pages.db'}"), open_access=True, embedder="hashing",
                     worker=False)
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as c:  # --open: loopback
        yield c


def _fails(*_: Any, **__: Any) -> Any:
    raise RuntimeError("internal detail 1234")


@pytest.mark.parametrize("path", ["/", "/stories/lamplight/canon"])
def test_an_unexpected_error_on_a_page_answers_an_html_error_page(client: TestClient, monkeypatch: pytest.MonkeyPatch,
                                                                   path: str) -> None:
    monkeypatch.setattr(client.app.state.ctx.services, "views", _fails)  # type: ignore[attr-defined]
    page = client.get(path)
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html"), page.text[:300]
    assert 'data-code="internal_error"' in page.text and "reference" in page.text
    assert "1234" not in page.text and "Traceback" not in page.text
    api = client.get("/v1/stories")  # the same fault behind an API route: problem+json, as before
    assert api.status_code == 500 and api.headers["content-type"] == "application/problem+json"
    assert api.json()["code"] == "internal_error" and "1234" not in api.text


def test_a_page_whose_error_page_cannot_render_still_answers_html(client: TestClient,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The fault may be in the templates themselves: the answer is then a plain HTML page."""
    from canon_ledger.infrastructure.web import pages

    monkeypatch.setattr(client.app.state.ctx.services, "views", _fails)  # type: ignore[attr-defined]
    monkeypatch.setattr(pages, "render", _fails)
    page = client.get("/")
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert "internal_error" in page.text and "1234" not in page.text
