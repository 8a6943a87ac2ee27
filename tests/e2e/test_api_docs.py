"""``/docs`` in a real browser with no network: Debian's Chromium driven by Playwright,
against a real ``canon serve`` on a loopback port, every request to any other host aborted;
and what else a caller without a key gets from that server.

What is checked is what a person sees offline: Swagger UI renders every operation of
``/openapi.json`` (its JS and CSS come from the server, out of an installed package), "Try it
out" calls the server under the page's own Content-Security-Policy, no request left
loopback, and the browser reported no CSP violation and no script error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.cli_runner import canon
from tests.e2e.test_http_server import Server, admin_key
from tests.e2e.test_viewer import ARTIFACTS, VIEWPORT, browser  # noqa: F401 - browser is a fixture

LOOPBACK = "127.0.0.1"
# Every CSP violation the page meets, as the browser reports it (an init script runs outside the page's CSP).
WATCH_CSP = """window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("api_docs")
    url = f"sqlite:///{tmp / 'docs.db'}"
    assert canon("--db", url, "init").returncode == 0
    admin_key(url)  # canon serve starts only once a key exists
    served = Server(url, tmp / "server.log")
    try:
        yield served
    finally:
        served.stop()


def test_docs_render_every_operation_offline_under_their_csp(browser, server: Server) -> None:  # noqa: F811
    operations = [(method.upper(), path) for path, ops in httpx.get(server.base + "/openapi.json").json()["paths"].items()
                  for method in ops]
    assert ("POST", "/v1/commands") in operations and len(operations) > 20
    headers = httpx.get(server.base + "/docs").headers
    assert "script-src 'self'" in headers["content-security-policy"] and "unsafe" not in headers["content-security-policy"]

    context = browser.new_context(viewport=VIEWPORT)
    left: list[str] = []  # requests to anything but the server's loopback address: aborted, and listed here
    seen: list[str] = []

    def only_loopback(route, request) -> None:  # type: ignore[no-untyped-def]
        parts = urlsplit(request.url)
        seen.append(request.url)
        if parts.scheme in ("data", "blob") or parts.hostname == LOOPBACK:
            route.continue_()
        else:
            left.append(request.url)
            route.abort()

    context.route("**/*", only_loopback)
    context.add_init_script(WATCH_CSP)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(server.base + "/docs")
        page.wait_for_selector(".opblock-summary-path[data-path='/v1/commands']", timeout=30_000)
        assert page.title() == "Canon Ledger - API"
        shown = page.eval_on_selector_all(".opblock", """blocks => blocks.map(b => [
            b.querySelector('.opblock-summary-method').textContent.trim(),
            b.querySelector('.opblock-summary-path').dataset.path])""")
        assert sorted(shown) == sorted([m, p] for m, p in operations)
        assert page.is_visible("button.authorize")  # the bearer scheme: paste a key, then "Try it out"

        # "Try it out" on /healthz: a fetch to the server, allowed by the page's connect-src 'self'
        healthz = page.locator(".opblock", has=page.locator(".opblock-summary-path[data-path='/healthz']"))
        healthz.locator(".opblock-summary").click()
        healthz.locator("button.try-out__btn").click()
        healthz.locator("button.execute").click()
        answer = healthz.locator(".live-responses-table tr.response .response-col_status").first
        answer.wait_for(timeout=15_000)
        assert answer.inner_text().strip() == "200"
        assert '"status": "ok"' in healthz.locator(".live-responses-table .microlight").first.inner_text()

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"api-docs-{server.port}.png"), full_page=False)
        violations = page.evaluate("window.__csp")
    finally:
        context.close()
    assert left == [], f"requests left loopback: {left}"
    assert any(u.endswith("/docs/assets/swagger-ui-bundle.js") for u in seen) and \
        any(u.endswith("/openapi.json") for u in seen), seen
    assert violations == [], violations
    assert errors == [], errors


def test_the_docs_assets_are_the_shipped_files_and_nothing_else(server: Server) -> None:
    from canon_ledger.infrastructure.http.docs import shipped

    for name, media in (("swagger-ui-bundle.js", "text/javascript"), ("swagger-ui.css", "text/css"),
                        ("favicon-32x32.png", "image/png")):
        r = httpx.get(f"{server.base}/docs/assets/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(media), (name, r.status_code)
        assert r.content == (shipped() / name).read_bytes() and r.headers["x-content-type-options"] == "nosniff"
        again = httpx.get(f"{server.base}/docs/assets/{name}", headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304
    for name in ("__init__.py", "../main.py", "%2e%2e/main.py", "nothing.js"):
        r = httpx.get(f"{server.base}/docs/assets/{name}")
        assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json", name
    for gone in ("/redoc", "/docs/oauth2-redirect"):  # no CDN page left behind
        assert httpx.get(server.base + gone).status_code == 404
    page = httpx.get(server.base + "/docs").text
    assert "<script>" not in page and "http" not in page.replace("http-equiv", "")  # no inline script, no URL elsewhere
    assert Path(shipped()).is_dir()


def test_a_real_server_tells_a_stranger_no_more_than_the_readme_says(server: Server) -> None:
    """The routes open without a key, on a real process and its real address."""
    ready = httpx.get(server.base + "/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    refused = httpx.post(server.base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers={"Accept": "application/json, text/event-stream"})
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge == f'Bearer resource_metadata="{server.base}/.well-known/oauth-protected-resource"'
    metadata = httpx.get(challenge.split('"')[1])
    assert metadata.status_code == 200 and metadata.json()["resource"] == f"{server.base}/mcp"
    for path in ("/v1/stories", "/metrics", "/v1/keys", "/docs/assets/nothing"):
        assert httpx.get(server.base + path).status_code in (401, 404), path
    assert httpx.get(server.base + "/stories/x/canon", follow_redirects=False).status_code == 303  # to /login
