"""The viewer in a real browser: Debian's Chromium driven by Playwright, against a real
``canon serve`` on a loopback port with the demo story, on both stores.

What is checked is what a person sees: every item of the JSON packet on the page with its
status and reason, a budget bar whose segments sum to the used tokens, a filter that finds the
dropped items, a source link that opens its event (with the command behind it), the review
queue confirming one proposal (double-clicked: applied once) and rejecting another, the next
packet and the compare view showing the confirmed revision, a worker key refused, and a
login session that logging out ends (a copied cookie no longer logs anyone in) while another
site's login form is refused.
Screenshots go to ``$CANON_TEST_ARTIFACTS`` (default ``.test-artifacts/``, not committed).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from canon_ledger.infrastructure.http.client import CanonClient
from canon_ledger.infrastructure.web.session import COOKIE
from tests.cli_runner import canon
from tests.conftest import missing_service
from tests.e2e.test_http_server import STORY, Server, admin_key

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("CANON_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / ".test-artifacts"))
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        missing_service("Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def demo_server(url: str, log: Path) -> Iterator[tuple[Server, str, str]]:
    """The demo story applied to ``url``, an admin key, a server on it that has indexed the
    demo (its worker embeds off the request path: a packet's L1 reads what is indexed, and a
    process that catches up itself, as ``canon mcp`` does, must read the same): (server, admin
    token, url)."""
    applied = canon("--db", url, "demo", "--format", "json")
    assert applied.returncode == 0, applied.stderr
    token = admin_key(url)
    server = Server(url, log)
    try:
        with CanonClient(server.base, token) as client:
            client.wait_indexed(json.loads(applied.stdout)["position"])
        yield server, token, url
    finally:
        server.stop()


@pytest.fixture
def demo(store_url: str, tmp_path: Path) -> Iterator[tuple[Server, str, str]]:
    """The demo story in a fresh store, a server on it, and (server, admin token, url): for a
    test that changes the story (decides proposals or drafts, confirms, retires, plans)."""
    with demo_server(store_url, tmp_path / "server.log") as served:
        yield served


@pytest.fixture(scope="module")
def served_demo(module_store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str]]:
    """As ``demo``, one per module (and store) that uses it, for tests that cannot disturb each
    other in any order: they read the story, and write only keys and login sessions of their
    own, refused commands, recorded packets (which change no packet's contents) and, in
    ``test_mcp``, a proposal under a key no other test names. A test that decides the demo's own
    proposals or drafts, or revises, retires or plans, takes ``demo``."""
    with demo_server(module_store_url, tmp_path_factory.mktemp("demo") / "server.log") as served:
        yield served


def key(url: str, scope: str) -> str:
    made = canon("--db", url, "key", "create", "--scope", scope, "--format", "json")
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout)["token"]


def logged_in(browser, server: Server, token: str, target: str):  # type: ignore[no-untyped-def]
    """A fresh browser context that logged in through the login page, on ``target``."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(server.base + target)
    assert "/login" in page.url  # no cookie yet: sent to the login page, which remembers the target
    page.fill("input[name=key]", token)
    page.click("form.login button[type=submit]")
    page.wait_for_load_state("load")
    assert page.url == server.base + target
    return context, page


def session_of(server: Server, token: str) -> str:
    """A login session's id (the cookie's value) for ``token``, logged in without a browser."""
    response = httpx.post(server.base + "/login", data={"key": token, "next": "/"}, timeout=30)
    assert response.status_code == 303, response.text[:300]
    return response.cookies[COOKIE]


def rows(page) -> list[dict]:  # type: ignore[no-untyped-def]
    """Every item row of the packet page, in page order, as the JSON names its fields."""
    return page.eval_on_selector_all("section.tier tr.item", """trs => trs.map(tr => ({
        tier: tr.closest('section.tier').dataset.tier, kind: tr.dataset.kind, key: tr.dataset.key,
        status: tr.dataset.status, tokens: Number(tr.dataset.tokens),
        reason: tr.querySelector('td.reason').childNodes[0].textContent.trim(),
        sources: [...tr.querySelectorAll('a.source')].map(a => Number(a.textContent))}))""")


def overflowing(page) -> list[str]:  # type: ignore[no-untyped-def]
    """Elements whose box reaches past the viewport's right edge (and the page's own width)."""
    return page.evaluate("""() => {
        const w = document.documentElement.clientWidth, out = [];
        if (document.documentElement.scrollWidth > w) out.push('document ' + document.documentElement.scrollWidth);
        for (const el of document.querySelectorAll('body *')) {
            const r = el.getBoundingClientRect();
            if (r.width > 0 && r.right > w + 1) out.push(el.tagName + '.' + el.className + ' ' + Math.round(r.right));
        }
        return out.slice(0, 10); }""")


def test_the_packet_page_shows_the_json_packet(browser, served_demo: tuple[Server, str, str]) -> None:
    server, token, _ = served_demo
    context, page = logged_in(browser, server, token, f"/stories/{STORY}/packet?role=writer&chapter=5")
    cookie = next(c for c in context.cookies() if c["name"] == COOKIE)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] != token
    with CanonClient(server.base, token) as api:
        packet = api.packet(STORY, "writer", 5)

    assert page.inner_text("#packet-id") == packet["packet_id"]
    assert rows(page) == [{k: i[k] for k in ("tier", "kind", "key", "status", "tokens", "reason", "sources")}
                          for i in packet["items"]]
    dropped = [i for i in packet["items"] if i["status"] == "dropped"]
    assert dropped, "the demo's chapter-5 writer packet drops duplicates"

    segments = page.eval_on_selector_all("#budget-bar rect", "rs => rs.map(r => [r.dataset.tier, Number(r.dataset.tokens), r.getBBox().width])")
    used = sum(t for name, t, _ in segments if name != "left")
    assert used == packet["used_tokens"] == int(page.inner_text("#used-tokens"))
    assert dict((n, t) for n, t, _ in segments)["left"] == packet["budget"] - packet["used_tokens"]
    assert [n for n, *_ in segments] == ["P0", "P1", "P2", "P3", "P4", "left"]
    bar_width = page.eval_on_selector("#budget-bar", "b => b.getBoundingClientRect().width")
    drawn = page.eval_on_selector_all("#budget-bar rect", "rs => rs.map(r => r.getBoundingClientRect().width)")
    assert abs(sum(drawn) - bar_width) < 3 and drawn[1] > drawn[3]  # P1 (363 tokens) is drawn wider than P3 (49)
    for tier in packet["tiers"]:
        cells = page.eval_on_selector(f"#tiers tr[data-tier={tier['tier']}]", "tr => [...tr.cells].map(c => c.textContent)")
        assert cells[1:5] == [str(tier["included"]), str(tier["trimmed"]), str(tier["dropped"]), str(tier["tokens"])]
    assert [s["step"] for s in packet["stages"]] == page.eval_on_selector_all("#stages tr[data-step]", "trs => trs.map(t => t.dataset.step)")

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"packet-viewer-{server.port}.png"), full_page=False)
    assert overflowing(page) == []

    page.select_option("select[name=status]", "dropped")  # the filter is a form control: the URL says it
    page.click("#packet-form button[type=submit]")
    page.wait_for_load_state("load")
    assert "status=dropped" in page.url
    shown = rows(page)
    assert [(r["kind"], r["key"]) for r in shown] == [(i["kind"], i["key"]) for i in dropped]
    assert {r["status"] for r in shown} == {"dropped"}

    page.select_option("select[name=status]", "")
    page.fill("input[name=chapter]", "4")  # another chapter: the form reloads the packet and the URL says which
    page.click("#packet-form button[type=submit]")
    page.wait_for_load_state("load")
    assert "chapter=4" in page.url and "chapter 4" in page.inner_text("h1")

    page.goto(server.base + f"/stories/{STORY}/packet?role=writer&chapter=5")
    first = packet["items"][0]
    page.click(f"tr.item[data-key='{first['key']}'] a.source")
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/stories/{STORY}/events/{first['sources'][0]}")
    assert page.inner_text("#event-position") == str(first["sources"][0])
    with CanonClient(server.base, token) as api:
        event = next(e for e in api.get("/v1/events", story=STORY, after=first["sources"][0] - 1, limit=1)["events"])
    assert page.inner_text("#event-type") == event["type"]
    command = page.inner_text("#event-command")
    assert command.startswith("demo-"), command  # the demo's command that recorded it

    page.goto(server.base + f"/stories/{STORY}/packet?role=writer&chapter=5")
    page.click("#audit-link")
    page.wait_for_load_state("load")
    assert page.get_attribute("#verdict", "data-verdict") == "ok"
    context.close()


def test_the_review_queue_confirms_once_and_rejects_and_the_compare_view_shows_it(
        browser, demo: tuple[Server, str, str]) -> None:
    server, token, _ = demo
    api = CanonClient(server.base, token)
    proposals = [
        {"type": "propose_canon", "command_id": "t-revise-ilse", "story_id": STORY, "proposal_id": "p-ilse-v3",
         "kind": "character", "key": "ilse", "name": "Ilse Marrow", "aliases": ["the Marrow girl"],
         "text": "REVIEW-CONFIRMED-MARKER Licensed lamplighter; now keeps two ledgers.", "fields": {},
         "valid_from": 4},
        {"type": "propose_canon", "command_id": "t-revise-oskar", "story_id": STORY, "proposal_id": "p-osk-v2",
         "kind": "character", "key": "oskar", "name": "Oskar Venn", "aliases": [],
         "text": "REVIEW-REJECTED-MARKER Oskar was a river pirate.", "fields": {}, "valid_from": 4},
    ]
    proposed = api.apply(proposals)
    assert [r["status"] for r in proposed["results"]] == ["applied", "applied"], proposed
    before = proposed["position"]
    context, page = logged_in(browser, server, token, f"/stories/{STORY}/review")
    assert page.locator("section.proposal[data-proposal='p-ilse-v3'] .current pre").inner_text().count("Licensed lamplighter of the Quay ward") == 1

    page.dblclick("section.proposal[data-proposal='p-ilse-v3'] form.confirm button")  # a double click applies once
    page.wait_for_load_state("load")
    assert page.get_attribute("#result", "data-status") in ("applied", "duplicate")
    page.fill("section.proposal[data-proposal='p-osk-v2'] form.reject input[name=reason]", "Not this story.")
    page.click("section.proposal[data-proposal='p-osk-v2'] form.reject button")
    page.wait_for_load_state("load")
    assert page.get_attribute("#result", "data-status") == "applied"
    assert page.locator("section.proposal[data-proposal='p-osk-v2']").count() == 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"review-queue-{server.port}.png"), full_page=True)
    assert overflowing(page) == []

    events = api.get("/v1/events", story=STORY, after=before, limit=1000)["events"]
    confirmed = [e for e in events if e["type"].endswith("Confirmed") and e["data"].get("proposal_id") == "p-ilse-v3"]
    rejected = [e for e in events if e["type"].endswith("Rejected") and e["data"].get("proposal_id") == "p-osk-v2"]
    assert len(confirmed) == 1 and len(rejected) == 1, [e["type"] for e in events]
    assert not [e for e in events if e["data"].get("proposal_id") == "p-osk-v2" and e["type"].endswith("Confirmed")]

    packet = api.packet_bytes(STORY, "writer", 5).decode()
    assert "REVIEW-CONFIRMED-MARKER" in packet and "REVIEW-REJECTED-MARKER" not in packet

    page.goto(server.base + f"/stories/{STORY}/compare?role=writer&chapter=5&from={before}")
    changed = page.locator("#changes tr[data-kind='character'][data-key='ilse'][data-change='changed']")
    assert changed.count() == 1 and "text" in changed.get_attribute("data-what").split()
    assert "REVIEW-CONFIRMED-MARKER" in changed.inner_text()
    assert page.locator("#changes tr[data-key='oskar'][data-change='changed']").count() == 0
    assert page.locator(f"#events tr[data-position='{confirmed[0]['position']}']").count() == 1
    assert "REVIEW-REJECTED-MARKER" not in page.content()

    page.goto(server.base + f"/stories/{STORY}/review")  # a draft of chapter 5, rejected with a reason
    page.fill("section.draft[data-draft='d5-wip'] form.reject input[name=reason]", "Too thin for canon.")
    page.click("section.draft[data-draft='d5-wip'] form.reject button")
    page.wait_for_load_state("load")
    assert page.get_attribute("#result", "data-status") == "applied"
    assert page.locator("section.draft[data-draft='d5-wip']").count() == 0
    rejected_drafts = api.get(f"/v1/stories/{STORY}/drafts", status="rejected")["drafts"]
    assert [d["reason"] for d in rejected_drafts if d["draft_id"] == "d5-wip"] == ["Too thin for canon."]
    api.close()
    context.close()


def test_a_worker_key_gets_no_queue_and_forged_posts_change_nothing(browser, served_demo: tuple[Server, str, str]) -> None:
    server, token, url = served_demo
    worker = key(url, "worker")
    context, page = logged_in(browser, server, worker, "/")
    assert page.locator(f"#stories tr[data-story='{STORY}']").count() == 1
    assert page.locator("a[href$='/review']").count() == 0
    response = page.goto(server.base + f"/stories/{STORY}/review")
    assert response.status == 403 and page.get_attribute("p.error", "data-code") == "forbidden"
    page.goto(server.base + "/")
    csrf = page.get_attribute("input[name=csrf]", "value")  # the worker's own, valid token (the logout form)
    author_session = session_of(server, token)  # logging in is an event: before the log's end is taken
    with CanonClient(server.base, token) as api:
        end = api.get("/v1/events", after=0, limit=1)["end"]
        # The worker's post, with its valid CSRF token and a real proposal: refused.
        post = context.request.post(server.base + f"/stories/{STORY}/review", form={
            "csrf": csrf, "command_id": "forged-1", "action": "confirm_canon", "id": "p-pending"}, max_redirects=0)
        assert post.status == 403
        # An author's cookie without the page's CSRF token (a forged cross-site form): refused.
        author = browser.new_context()
        author.add_cookies([{"name": COOKIE, "value": author_session, "url": server.base}])
        for forged in ({}, {"csrf": "0" * 40}, {"csrf": csrf}):
            post = author.request.post(server.base + f"/stories/{STORY}/review", form={
                **forged, "command_id": "forged-2", "action": "confirm_canon", "id": "p-pending"}, max_redirects=0)
            assert post.status == 403, forged
        assert api.get("/v1/events", after=0, limit=1)["end"] == end  # nothing was appended
        pending = api.get(f"/v1/stories/{STORY}/proposals", status="proposed")["proposals"]
        assert [p["proposal_id"] for p in pending] == ["p-pending"]
        author.close()

    bad = browser.new_context()
    page = bad.new_page()
    page.goto(server.base + "/login")
    page.fill("input[name=key]", "not-a-key")
    page.click("form.login button[type=submit]")
    assert page.locator("p.error").count() == 1 and "/login" in page.url
    assert not [c for c in bad.cookies() if c["name"] == COOKIE]
    bad.close()
    context.close()


def test_the_secrets_grid_shows_who_learned_what_and_when(browser, served_demo: tuple[Server, str, str]) -> None:
    """Who knows what (issue 43), in a story of its own beside the demo: characters by secrets, a cell
    the chapter the character learned it with how as its tooltip, the as-of form reloading the grid."""
    from tests.integration.test_who_knows import STORY as OSK, commands

    server, token, _ = served_demo
    with CanonClient(server.base, token) as api:
        assert {r["status"] for r in api.apply(commands())["results"]} == {"applied"}
    context, page = logged_in(browser, server, token, f"/stories/{OSK}/secrets?as_of=9")
    assert page.eval_on_selector_all("#knows thead th[data-key]", "ths => ths.map(t => t.dataset.key)") == \
        ["harl", "vault"]
    cell = page.locator("#knows tr[data-character='mira'] td[data-secret='harl']")
    assert cell.inner_text() == "ch. 9" and cell.get_attribute("title") == "told by Orrin"
    assert page.locator("#knows tr[data-character='mira'] td[data-secret='vault']").inner_text() == ""
    assert page.locator("#knows tr[data-character='orrin'] .badge").inner_text() == "POV"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"secrets-grid-{server.port}.png"), full_page=False)
    assert overflowing(page) == []
    page.fill("input[name=as_of]", "8")
    page.click("form.controls button[type=submit]")
    page.wait_for_load_state("load")
    assert "as_of=8" in page.url and page.locator("#knows tr[data-character='mira']").count() == 0
    context.close()


def test_pages_refuse_bad_input_with_the_api_code(served_demo: tuple[Server, str, str]) -> None:
    """Without a browser: each bad query gets an HTML error page with the status and code the
    API would give, and no page of a hidden or unknown story exists."""
    server, token, url = served_demo
    limited = canon("--db", url, "key", "create", "--scope", "author", "--story", "other", "--format", "json")
    assert limited.returncode == 0, limited.stderr
    cookies = {COOKIE: session_of(server, token)}
    cases = [
        (f"/stories/{STORY}/packet?chapter={10**30}", 422, "invalid_field"),
        (f"/stories/{STORY}/packet?chapter=-1", 422, "invalid_field"),
        (f"/stories/{STORY}/packet?chapter=abc", 422, "invalid_field"),
        (f"/stories/{STORY}/packet?role=poet&chapter=5", 422, "invalid_field"),
        (f"/stories/{STORY}/packet?chapter=5&at=999999999", 422, "position_beyond_log"),
        (f"/stories/{STORY}/packet?chapter=99", 404, "unknown_chapter"),
        ("/stories/nope/packet?chapter=1", 404, "unknown_story"),
        (f"/stories/{STORY}/events/999999", 404, "unknown_event"),
        (f"/stories/{STORY}/canon/character/nobody", 404, "unknown_canon_entry"),
        ("/packets/pkt_nothing/audit", 404, "unknown_packet"),
    ]
    for path, status, code in cases:
        response = httpx.get(server.base + path, cookies=cookies, timeout=30)
        assert response.status_code == status, (path, response.text[:300])
        assert response.headers["content-type"].startswith("text/html")
        assert f'data-code="{code}"' in response.text, (path, response.text[:500])
    other = json.loads(limited.stdout)["token"]
    cookies = {COOKIE: session_of(server, other)}
    response = httpx.get(server.base + f"/stories/{STORY}/packet?chapter=5", cookies=cookies, timeout=30)
    assert response.status_code == 404 and 'data-code="unknown_story"' in response.text
    response = httpx.get(server.base + "/", cookies=cookies, timeout=30)
    assert response.status_code == 200 and f"data-story=\"{STORY}\"" not in response.text
    response = httpx.get(server.base + f"/stories/{STORY}/packet?chapter=5", timeout=30)
    assert response.status_code == 303 and response.headers["location"].startswith("/login?next=")
    response = httpx.post(server.base + "/login", data={"key": token, "next": "//evil.example/"}, timeout=30)
    assert response.status_code == 303 and response.headers["location"] == "/"
    assert "default-src 'self'" in httpx.get(server.base + "/login", timeout=30).headers["content-security-policy"]


def test_logging_out_ends_the_session_so_a_copied_cookie_logs_nobody_in(browser, served_demo: tuple[Server, str, str]) -> None:
    server, token, _ = served_demo
    packet = f"/stories/{STORY}/packet?role=writer&chapter=5"
    context, page = logged_in(browser, server, token, "/")
    cookie = next(c for c in context.cookies() if c["name"] == COOKIE)
    assert cookie["value"] != token and token not in cookie["value"]  # a session id, not the key
    copied = {"name": COOKIE, "value": cookie["value"], "url": server.base}

    before = browser.new_context(viewport=VIEWPORT)  # the copy works while the session lasts
    before.add_cookies([copied])
    early = before.new_page()
    assert early.goto(server.base + packet).status == 200 and early.url == server.base + packet
    before.close()

    page.click("form.who button[type=submit]")  # the page's own Log out button
    page.wait_for_load_state("load")
    assert page.url == server.base + "/login"
    assert not [c for c in context.cookies() if c["name"] == COOKIE]

    thief = browser.new_context(viewport=VIEWPORT)  # the copied cookie, replayed after the logout
    thief.add_cookies([copied])
    stolen = thief.new_page()
    stolen.goto(server.base + packet)
    assert stolen.url.startswith(server.base + "/login?next=")
    assert stolen.locator("form.login").count() == 1 and stolen.locator("#packet-id").count() == 0
    thief.close()

    # Another site's page posting the login form with its own key (login CSRF): refused, no cookie.
    evil = browser.new_context(viewport=VIEWPORT)
    evil.route("http://evil.example/**", lambda route: route.fulfill(content_type="text/html", body=(
        f'<form method="post" action="{server.base}/login"><input name="key" value="{token}">'
        '<input name="next" value="/"><button type="submit">go</button></form>')))
    lure = evil.new_page()
    lure.goto("http://evil.example/")
    with lure.expect_navigation():
        lure.click("button[type=submit]")
    assert lure.url == server.base + "/login"
    assert lure.get_attribute("p.error", "data-code") == "cross_site_login"
    assert not [c for c in evil.cookies() if c["name"] == COOKIE]
    evil.close()
    context.close()
