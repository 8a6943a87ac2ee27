"""The viewer's login session (issue 37), in-process on the real app and a real store, on both
stores: the cookie holds a session id, never the key's token; logging out ends the session in
the log, so the same cookie replayed is sent to the login page; a revoked key ends its
sessions; a cross-site POST /login is refused; the forms' CSRF token follows the session.
And the application service across two processes' worth of ``Keys`` on one store (replicas)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fastapi.testclient import TestClient

from canon_ledger.application import keys as keys_module
from canon_ledger.application.keys import Keys
from canon_ledger.domain.viewer_session import ViewerSession, session_hash
from canon_ledger.infrastructure.http.app import create_app
from canon_ledger.infrastructure.stores import open_ledger
from canon_ledger.infrastructure.web import session

BASE = "http://testserver"  # the test client's own origin


class Viewer:
    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.ctx = client.app.state.ctx  # type: ignore[attr-defined]
        self.admin, _ = self.ctx.keys.create("admin", [], "the-admin")
        self.author, _ = self.ctx.keys.create("author", [], "the-author")

    def position(self) -> int:
        return int(self.ctx.services.ledger.event_log.position())

    def login(self, token: str, headers: dict[str, str] | None = None) -> Any:
        """POST /login as a browser would, from a clean cookie jar."""
        self.client.cookies.clear()
        return self.client.post("/login", data={"key": token, "next": "/"}, headers=headers or {},
                                follow_redirects=False)

    def get(self, path: str, cookie: str | None) -> Any:
        self.client.cookies.clear()
        if cookie is not None:
            self.client.cookies.set(session.COOKIE, cookie)
        return self.client.get(path, follow_redirects=False)

    def post(self, path: str, cookie: str | None, form: dict[str, str]) -> Any:
        self.client.cookies.clear()
        if cookie is not None:
            self.client.cookies.set(session.COOKIE, cookie)
        return self.client.post(path, data=form, follow_redirects=False)

    def csrf(self, cookie: str) -> str:
        page = self.get("/", cookie)
        assert page.status_code == 200, page.text[:300]
        found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert found, page.text[:500]
        return found.group(1)

    def events(self, token: str) -> list[dict[str, Any]]:
        self.client.cookies.clear()
        answer = self.client.get("/v1/events?limit=1000", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        return list(answer.json()["events"])


def set_cookie(response: Any) -> str | None:
    """The value the response sets the session cookie to (None: it sets none)."""
    for header in response.headers.get_list("set-cookie"):
        name, _, rest = header.partition("=")
        if name == session.COOKIE:
            value = rest.split(";", 1)[0]
            return value or None
    return None


@pytest.fixture
def viewer(store_url: str) -> Iterator[Viewer]:
    app = create_app(store_url, embedder="hashing", worker=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Viewer(client)


@pytest.fixture(scope="module")
def login_viewer(module_store_url: str) -> Iterator[Viewer]:
    """One viewer per module and store for the login tests parametrized by request headers: each
    logs in from a clean cookie jar and opens at most a session of its own (a refused login
    counts the log's end before and after itself)."""
    app = create_app(module_store_url, embedder="hashing", worker=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Viewer(client)


def test_the_cookie_holds_a_session_id_never_the_token(viewer: Viewer) -> None:
    before = viewer.position()
    login = viewer.login(viewer.author)
    assert login.status_code == 303 and login.headers["location"] == "/"
    cookie = set_cookie(login)
    assert cookie is not None and cookie != viewer.author and viewer.author not in cookie
    header = next(h for h in login.headers.get_list("set-cookie") if h.startswith(session.COOKIE + "="))
    assert "HttpOnly" in header and "SameSite=strict" in header and f"Max-Age={session.MAX_AGE}" in header
    page = viewer.get("/", cookie)
    assert page.status_code == 200 and "the-author" in page.text
    assert viewer.get("/", viewer.author).status_code == 303  # the token is no session id
    # One event: the session, named by the SHA-256 of its id, holding neither the id nor the token.
    assert viewer.position() == before + 1
    opened = [e for e in viewer.events(viewer.admin) if e["type"] == "ViewerSession.Opened"]
    assert len(opened) == 1 and opened[0]["data"]["session_hash"] == session_hash(cookie)
    logged = json.dumps(viewer.events(viewer.admin))
    assert cookie not in logged and viewer.author not in logged and viewer.admin not in logged


def test_a_cookie_replayed_after_logout_is_sent_to_the_login_page(viewer: Viewer) -> None:
    lags = viewer.ctx.lags()
    cookie = set_cookie(viewer.login(viewer.author))
    assert cookie is not None
    csrf = viewer.csrf(cookie)
    assert viewer.post("/logout", cookie, {"csrf": "0" * 40}).status_code == 403  # a forged logout
    assert viewer.get("/", cookie).status_code == 200
    out = viewer.post("/logout", cookie, {"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert any(h.startswith(session.COOKIE + '=""') or h.startswith(session.COOKIE + "=;")
               for h in out.headers.get_list("set-cookie")), out.headers.get_list("set-cookie")
    replayed = viewer.get("/stories/lamplight/canon", cookie)  # the copied cookie, after logout
    assert replayed.status_code == 303
    assert replayed.headers["location"] == "/login?next=%2Fstories%2Flamplight%2Fcanon"
    ended = viewer.position()
    # A second logout is harmless: replayed with its cookie, or with none (another tab).
    again = viewer.post("/logout", cookie, {"csrf": csrf})
    assert again.status_code == 303 and again.headers["location"] == "/login"
    assert viewer.post("/logout", None, {}).status_code == 303
    assert viewer.position() == ended  # nothing more was written
    assert viewer.get("/", cookie).status_code == 303
    assert viewer.ctx.lags() == lags  # no read model subscribes to sessions: none has more to project


def test_a_session_of_a_revoked_key_is_sent_to_the_login_page(viewer: Viewer) -> None:
    cookie = set_cookie(viewer.login(viewer.author))
    assert cookie is not None and viewer.get("/", cookie).status_code == 200
    assert viewer.ctx.keys.revoke("the-author")
    page = viewer.get("/", cookie)
    assert page.status_code == 303 and page.headers["location"] == "/login?next=%2F"
    refused = viewer.login(viewer.author)  # and a revoked key opens no new session
    assert refused.status_code == 401 and set_cookie(refused) is None


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"},
    {"Origin": "https://testserver"},  # another scheme
    {"Origin": "http://testserver:8080"},  # another port
    {"Origin": "null"},  # a sandboxed or privacy-redirected form
    {"Referer": "http://evil.example/login.html"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "cross-site", "Origin": BASE},
], ids=["origin", "scheme", "port", "null", "referer", "sec-fetch-site", "fetch-site-beats-origin"])
def test_a_cross_site_login_is_refused_and_sets_no_cookie(login_viewer: Viewer, headers: dict[str, str]) -> None:
    viewer = login_viewer
    before = viewer.position()
    refused = viewer.login(viewer.author, headers)
    assert refused.status_code == 403
    assert refused.headers["content-type"].startswith("text/html")
    assert 'data-code="cross_site_login"' in refused.text
    assert not refused.headers.get_list("set-cookie")
    assert viewer.position() == before  # no session was opened


@pytest.mark.parametrize("headers", [
    {"Origin": BASE},
    {"Origin": "http://TestServer:80"},  # the same origin, spelled otherwise
    {"Referer": BASE + "/login?next=%2F"},
    {"Sec-Fetch-Site": "same-origin", "Origin": BASE, "Referer": BASE + "/login"},
    {},  # neither header: curl, a script
], ids=["origin", "origin-default-port", "referer", "browser", "no-headers"])
def test_a_same_origin_login_works(login_viewer: Viewer, headers: dict[str, str]) -> None:
    viewer = login_viewer
    login = viewer.login(viewer.author, headers)
    assert login.status_code == 303, login.text[:300]
    cookie = set_cookie(login)
    assert cookie is not None and viewer.get("/", cookie).status_code == 200


def test_the_csrf_token_follows_the_session_not_the_key(viewer: Viewer) -> None:
    first = set_cookie(viewer.login(viewer.author))
    second = set_cookie(viewer.login(viewer.author))
    assert first is not None and second is not None and first != second
    csrf_first, csrf_second = viewer.csrf(first), viewer.csrf(second)
    assert csrf_first == session.csrf_token(first) and csrf_second == session.csrf_token(second)
    assert csrf_first != csrf_second and session.csrf_token(viewer.author) not in (csrf_first, csrf_second)
    form = {"action": "confirm_canon", "command_id": "csrf-1", "id": "p-none"}
    # Another session's token, or one derived from the key, is refused (before anything is read).
    for forged in (csrf_first, session.csrf_token(viewer.author)):
        refused = viewer.post("/stories/lamplight/review", second, {**form, "csrf": forged})
        assert refused.status_code == 403 and 'data-code="csrf_failed"' in refused.text


def test_logging_in_again_ends_the_former_session(viewer: Viewer) -> None:
    first = set_cookie(viewer.login(viewer.author))
    assert first is not None
    viewer.client.cookies.set(session.COOKIE, first)
    again = viewer.client.post("/login", data={"key": viewer.admin, "next": "/"}, follow_redirects=False)
    second = set_cookie(again)
    assert again.status_code == 303 and second is not None and second != first
    assert viewer.get("/", first).status_code == 303
    assert "the-admin" in viewer.get("/", second).text


def test_session_events_are_for_admins_only(viewer: Viewer) -> None:
    cookie = set_cookie(viewer.login(viewer.author))
    assert cookie is not None
    viewer.post("/logout", cookie, {"csrf": viewer.csrf(cookie)})
    assert {e["type"] for e in viewer.events(viewer.admin)} >= {"ViewerSession.Opened", "ViewerSession.Ended"}
    seen = [e["type"] for e in viewer.events(viewer.author)]
    assert not [t for t in seen if t.startswith(("ApiKey", "ViewerSession"))], seen


# -- the application service, as two replicas of ``canon serve`` on one store would use it ---------

class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def test_sessions_are_shared_by_replicas_and_end_by_logout_revocation_or_expiry(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Answers are remembered for CHECK_TTL (2 s) seconds: a shorter one here, the same rule
    # (a replica's remembered answer expires, then it reads the log), without 4 s of sleep.
    monkeypatch.setattr(keys_module, "CHECK_TTL", 0.3)
    ttl = keys_module.CHECK_TTL
    one, two = open_ledger(store_url), open_ledger(store_url)  # two processes' worth: no shared memory
    clock = Clock()
    try:
        a, b = Keys(one, clock), Keys(two, clock)
        token, _ = a.create("author", ["lamplight"], "reader")
        assert a.open_session("cl_unknown", 60) is None
        opened = a.open_session(token, 3600)
        assert opened is not None
        session_id, principal = opened
        assert principal.name == "reader" and principal.stories == ("lamplight",)
        assert b.session_principal(session_id) == principal  # the other replica knows it
        assert b.session_principal(token) is None and b.session_principal(session_id + "x") is None
        stored: ViewerSession = two.repository.get(ViewerSession.create_id(session_hash(session_id)))
        assert stored.token_hash != token and stored.expires_at == clock.now + timedelta(hours=1)

        assert a.end_session(session_id) is True  # logged out on replica a
        assert a.session_principal(session_id) is None  # at once there
        time.sleep(ttl + 0.1)
        assert b.session_principal(session_id) is None  # within CHECK_TTL on b
        assert a.end_session(session_id) is False and b.end_session(session_id) is False  # harmless again
        assert a.end_session("never-opened") is False

        later = a.open_session(token, 3600)
        assert later is not None and b.session_principal(later[0]) == principal
        a.revoke("reader")  # the key revoked on replica a ends its sessions on b too
        time.sleep(ttl + 0.1)
        assert b.session_principal(later[0]) is None

        other, _ = a.create("worker", [], "short")
        brief = a.open_session(other, 60)
        assert brief is not None and b.session_principal(brief[0]) is not None
        clock.now += timedelta(seconds=61)  # expired: no event needed
        assert a.session_principal(brief[0]) is None and b.session_principal(brief[0]) is None
    finally:
        one.close()
        two.close()


def test_what_is_remembered_answers_as_a_read_would(store_url: str) -> None:
    """``remembered`` and ``remembered_session`` (the server's event loop asks them before it
    reads in a thread): None until a check was read, then that answer; a revocation or a logout
    forgets it at once in the process that made it; an expired session is refused from memory."""
    ledger = open_ledger(store_url)
    clock = Clock()
    try:
        keys = Keys(ledger, clock)
        token, _ = keys.create("author", [], "reader")
        assert keys.remembered(token) is None and keys.remembered("cl_unknown") is None
        principal = keys.check(token)
        assert principal is not None and keys.remembered(token) == (principal,)
        assert keys.check("cl_unknown") is None and keys.remembered("cl_unknown") == (None,)

        opened = keys.open_session(token, 60)
        assert opened is not None
        session_id = opened[0]
        assert keys.remembered_session(session_id) is None  # the session itself not read yet
        assert keys.session_principal(session_id) == principal
        assert keys.remembered_session(session_id) == (principal,)
        clock.now += timedelta(seconds=61)
        assert keys.remembered_session(session_id) == (None,) and keys.session_principal(session_id) is None
        clock.now -= timedelta(seconds=61)

        assert keys.end_session(session_id) is True
        assert keys.remembered_session(session_id) is None and keys.session_principal(session_id) is None
        keys.revoke("reader")
        assert keys.remembered(token) is None and keys.check(token) is None
        assert keys.remembered(token) == (None,)
    finally:
        ledger.close()
