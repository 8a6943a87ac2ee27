"""The review card, an entry's history and Compare's starting position, in a real browser
(Debian's Chromium driven by Playwright) against a real ``canon serve`` with the demo story, on
both stores; the fixtures are ``test_viewer``'s.

What a reviewer sees: the whole proposal (name, chapter, aliases, ``hidden_until``, text, fields,
tags) beside the confirmed version in force at its chapter, every difference marked, competing
proposals for one entry naming each other; an entry's history saying which chapters each
version holds at; Compare opening with the packet's previous change as its "from"; a position
before the chapter existed saying "as of position N"; table cells that break no word; a draft's
continuity findings (issue 42) with their spans marked, one dismissed, the accept overriding the rest.
"""

from __future__ import annotations

import httpx

from canon_ledger.infrastructure.http.client import CanonClient
from canon_ledger.infrastructure.web.session import COOKIE
from tests.e2e.test_http_server import STORY, Server
from tests.e2e.test_viewer import ARTIFACTS, browser, demo, logged_in, overflowing, session_of  # noqa: F401 (fixtures)

# Words split across two lines inside the page's main content, but for long tokens (keys, ids,
# code, source positions), which alone may break anywhere.
BROKEN_WORDS = """() => {
    const out = [];
    const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        if (n.parentElement.closest('.key, code, a.source, span.source')) continue;
        const re = /\\S+/g;
        for (let m = re.exec(n.textContent); m; m = re.exec(n.textContent)) {
            const r = document.createRange();
            r.setStart(n, m.index);
            r.setEnd(n, m.index + m[0].length);
            const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
            if (tops.size > 1) out.push(m[0]);
        }
    }
    return out; }"""


def propose(pid: str, key: str, valid_from: int, kind: str = "character", **more: object) -> dict[str, object]:
    return {"type": "propose_canon", "command_id": f"t-{pid}", "story_id": STORY, "proposal_id": pid, "kind": kind,
            "key": key, "name": more.pop("name", key.title()), "aliases": more.pop("aliases", []),
            "text": more.pop("text", f"The {key}."), "fields": more.pop("fields", {}), "valid_from": valid_from, **more}


def cell(page, pid: str, attr: str, side: str) -> str:  # type: ignore[no-untyped-def]
    return page.inner_text(f"section.proposal[data-proposal='{pid}'] tr[data-attr='{attr}'] td.{side}")


def test_the_review_card_shows_the_whole_proposal_beside_the_version_in_force(
        browser, demo: tuple[Server, str, str]) -> None:  # noqa: F811
    server, token, _ = demo
    with CanonClient(server.base, token) as api:
        applied = api.apply([
            propose("p-ilse-v3", "ilse", 6, name="Ilse Marrow", aliases=["the Marrow girl", "Warden Marrow"],
                    text="Licensed lamplighter of the Quay ward; now keeps two ledgers, one of them secret.",
                    fields={"status": "warden", "licence": "Quay ward", "hidden_until": 7}, tags=["lead"]),
            propose("p-ferry-a", "ferry", 5, kind="location", name="The Ferry"),
            propose("p-ferry-b", "ferry", 5, kind="location", name="The Old Ferry", aliases=["the crossing"],
                    fields={"state": "abandoned"}),
        ])
        assert [r["status"] for r in applied["results"]] == ["applied"] * 3, applied
    context, page = logged_in(browser, server, token, f"/stories/{STORY}/review")
    ilse = "section.proposal[data-proposal='p-ilse-v3']"
    assert page.get_attribute(ilse, "data-new-entry") == "no" and page.get_attribute(ilse, "data-competing") == ""
    # Beside it: step 2 (from chapter 4), the version in force at chapter 6, marked as such.
    assert "in force from ch. 4" in page.inner_text(f"{ilse} p.outcome")
    assert page.inner_text(f"{ilse} strong.would") == "in force from ch. 6"
    assert page.locator(f"{ilse} .current pre").inner_text().count("Licensed lamplighter of the Quay ward") == 1
    changes = dict(page.eval_on_selector_all(f"{ilse} tr[data-attr]", "trs => trs.map(t => [t.dataset.attr, t.dataset.change])"))
    assert changes == {"name": "same", "valid_from": "changed", "aliases": "changed", "hidden_until": "added",
                       "text": "changed", "fields.licence": "same", "fields.status": "changed", "tags": "added"}, changes
    assert (cell(page, "p-ilse-v3", "hidden_until", "current"), cell(page, "p-ilse-v3", "hidden_until", "proposed")) \
        == ("—", "ch. 7")
    aliases = f"{ilse} tr[data-attr='aliases']"
    assert page.inner_text(f"{aliases} td.current del") == "Lamplighter Marrow"
    assert page.inner_text(f"{aliases} td.proposed ins") == "Warden Marrow"
    assert page.inner_text(f"{ilse} tr[data-attr='fields.status'] td.current del") == "licensed"
    assert page.inner_text(f"{ilse} tr[data-attr='fields.status'] td.proposed ins") == "warden"
    added = page.eval_on_selector_all(f"{ilse} tr[data-attr='text'] td.proposed ins", "xs => xs.map(x => x.textContent)")
    removed = page.eval_on_selector_all(f"{ilse} tr[data-attr='text'] td.current del", "xs => xs.map(x => x.textContent)")
    assert "now keeps two ledgers" in " ".join(added) and "since the winter exam" in " ".join(removed)
    assert "Licensed lamplighter of the Quay ward" not in "".join(added + removed)

    # Two pending proposals for one new (kind, key): each names the other; neither claims the entry alone.
    for me, other in (("p-ferry-a", "p-ferry-b"), ("p-ferry-b", "p-ferry-a")):
        card = f"section.proposal[data-proposal='{me}']"
        assert page.get_attribute(card, "data-competing") == other and page.get_attribute(card, "data-new-entry") == "yes"
        assert page.get_attribute(f"{card} p.competing a.rival", "href") == f"#proposal-{other}"
        assert "unless a competing proposal is confirmed first" in page.inner_text(f"{card} p.outcome")
    page.click("section.proposal[data-proposal='p-ferry-a'] p.competing a.rival")
    assert page.url.endswith("#proposal-p-ferry-b")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"review-card-{server.port}.png"), full_page=True)
    assert overflowing(page) == [] and page.evaluate(BROKEN_WORDS) == []

    # Confirming one: the other is now a revision of it, compared with it, and competes with nobody.
    page.click("section.proposal[data-proposal='p-ferry-a'] form.confirm button")
    page.wait_for_load_state("load")
    assert page.get_attribute("#result", "data-status") == "applied"
    rest = "section.proposal[data-proposal='p-ferry-b']"
    assert page.get_attribute(rest, "data-new-entry") == "no" and page.get_attribute(rest, "data-competing") == ""
    assert (cell(page, "p-ferry-b", "name", "current"), cell(page, "p-ferry-b", "name", "proposed")) \
        == ("The Ferry", "The Old Ferry")
    assert page.get_attribute(f"{rest} tr[data-attr='fields.state']", "data-change") == "added"
    assert "in force from ch. 5" in page.inner_text(f"{rest} p.outcome")
    context.close()


def test_the_history_says_when_each_version_holds_and_compare_starts_at_the_previous_change(
        browser, demo: tuple[Server, str, str]) -> None:  # noqa: F811
    server, token, _ = demo
    with CanonClient(server.base, token) as api:
        applied = api.apply([
            propose("p-ilse-tie", "ilse", 4, name="Ilse Marrow", text="TIE-MARKER Licensed; keeps a second ledger."),
            {"type": "confirm_canon", "command_id": "t-confirm-tie", "story_id": STORY, "proposal_id": "p-ilse-tie"},
            {"type": "retire_canon", "command_id": "t-retire-ilse", "story_id": STORY, "kind": "character",
             "key": "ilse", "valid_from": 9, "reason": "leaves the Quay"},
        ])
        assert [r["status"] for r in applied["results"]] == ["applied"] * 3, applied
        packet = api.packet(STORY, "writer", 5, record="false")
        planned = api.get(f"/v1/stories/{STORY}/chapters/5")["goals_source"]
    revision = max(s for item in packet["items"] for s in item["sources"] if s <= packet["position"])

    context, page = logged_in(browser, server, token, f"/stories/{STORY}/canon/character/ilse")
    shown = page.eval_on_selector_all("#versions tr.version", """trs => trs.map(tr => [Number(tr.dataset.step),
        tr.querySelector('td.in-force').dataset.inForce, tr.querySelector('td.in-force').dataset.now])""")
    # Step 2 (from 4) is tied by step 3 (from 4, confirmed later); the retirement at 9 ends step 3.
    assert shown == [[1, "in force ch. 1\u20133", "no"], [2, "superseded before it took effect", "no"],
                     [3, "in force ch. 4\u20138", "yes"], [4, "retired at ch. 9", "no"]], shown
    assert page.evaluate(BROKEN_WORDS) == []

    # Compare opens with the position before the packet's latest cited event (the tie's revision).
    page.goto(server.base + f"/stories/{STORY}/compare")
    assert page.get_attribute("#compare-default", "data-from") == str(revision - 1)
    assert page.input_value("#packet-form input[name=from]") == str(revision - 1)
    assert page.locator("#changes").count() == 0  # offered, not compiled until asked
    page.click("#compare-default-link")
    page.wait_for_load_state("load")
    assert f"from={revision - 1}" in page.url
    changed = page.locator("#changes tr[data-kind='character'][data-key='ilse'][data-change='changed']")
    assert changed.count() == 1 and "TIE-MARKER" in changed.inner_text()
    assert page.evaluate(BROKEN_WORDS) == []
    page.goto(server.base + f"/stories/{STORY}/packet?role=writer&chapter=5")
    assert overflowing(page) == [] and page.evaluate(BROKEN_WORDS) == []  # kinds like chapter_summary whole
    context.close()

    # A position before chapter 5 was planned: the refusal says which position (viewer and API).
    cookies = {COOKIE: session_of(server, token)}
    before = planned - 1
    for path in (f"/stories/{STORY}/compare?role=writer&chapter=5&from={before}",
                 f"/stories/{STORY}/compare?role=writer&chapter=5&from={planned}&to={before}",
                 f"/stories/{STORY}/packet?role=writer&chapter=5&at={before}"):
        response = httpx.get(server.base + path, cookies=cookies, timeout=60)
        assert response.status_code == 404 and 'data-code="unknown_chapter"' in response.text, path
        assert f"has not been planned as of position {before}" in response.text, path
    api_answer = httpx.get(server.base + f"/v1/stories/{STORY}/packet", params={"role": "writer", "chapter": 5,
                           "at": before}, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert api_answer.status_code == 404
    assert api_answer.json()["detail"].endswith(f"has not been planned as of position {before}")
    # A chapter planned only now: Compare offers no earlier packet, and says why.
    with CanonClient(server.base, token) as api:
        api.apply([{"type": "plan_chapter", "command_id": "t-plan-6", "story_id": STORY, "chapter": 6, "volume": 1,
                    "goals": ["Ilse reads the second ledger"]}])
    response = httpx.get(server.base + f"/stories/{STORY}/compare?role=writer&chapter=6", cookies=cookies, timeout=60)
    assert response.status_code == 200 and 'data-from=""' in response.text
    assert "has not changed since chapter 6 was planned" in response.text


def test_a_drafts_findings_are_shown_dismissed_and_overridden_on_accept(
        browser, demo: tuple[Server, str, str]) -> None:  # noqa: F811
    """Issue 42: a draft naming two dead characters as acting shows two error findings, their
    spans marked in the text and their evidence linked to its event; one dismissed with a reason
    is listed apart; the accept then asks why it overrides the other, and records it."""
    server, token, _ = demo
    with CanonClient(server.base, token) as api:
        applied = api.apply([
            propose("p-harl", "harl", 2, text="Harl, the old porter.", fields={"state": "dead"}),
            {"type": "confirm_canon", "command_id": "t-confirm-harl", "story_id": STORY, "proposal_id": "p-harl"},
            propose("p-bram", "bram", 2, text="Bram, the bell-ringer.", fields={"state": "dead"}),
            {"type": "confirm_canon", "command_id": "t-confirm-bram", "story_id": STORY, "proposal_id": "p-bram"},
            {"type": "submit_draft", "command_id": "t-ghost", "story_id": STORY, "chapter": 5, "draft_id": "d-ghost",
             "text": "Harl walked into the hall. Bram walked into the yard, ringing a <b>bell</b>."},
        ])
        assert [r["status"] for r in applied["results"]] == ["applied"] * 5, applied
        report = api.get(f"/v1/stories/{STORY}/drafts/d-ghost/check")
    found = {f["entry"]["key"]: f for f in report["findings"]}
    assert sorted(found) == ["bram", "harl"], report
    assert {f["type"] for f in found.values()} == {"unavailable_character"}, report
    harl, bram = found["harl"]["id"], found["bram"]["id"]

    context, page = logged_in(browser, server, token, f"/stories/{STORY}/review")
    card = "section.draft[data-draft='d-ghost']"
    assert page.get_attribute(card, "data-errors") == "2"
    assert page.inner_text(f"{card} mark#span-{harl}") == "Harl"
    assert page.inner_text(f"{card} mark#span-{bram}") == "Bram"
    assert "ringing a <b>bell</b>." in page.inner_text(f"{card} details.text pre")  # the text's own markup, as text
    assert page.get_attribute(f"li#finding-{harl}", "data-severity") == "error"
    shown = page.inner_text(f"li#finding-{harl}")
    assert "harl" in shown and found["harl"]["message"] in shown
    evidence = page.locator(f"li#finding-{harl} ul.evidence a.source").first
    source = found["harl"]["evidence"][0]["source"]
    assert evidence.get_attribute("href") == f"/stories/{STORY}/events/{source}"
    assert "chapter 2" in page.inner_text(f"li#finding-{harl} ul.evidence li")
    assert page.get_attribute(f"{card} form.accept input[name=override_reason]", "required") is not None
    assert page.locator(f"{card} p.override-note").count() == 1
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"review-findings-{server.port}.png"), full_page=True)
    assert overflowing(page) == [] and page.evaluate(BROKEN_WORDS) == []
    page.click(f"li#finding-{harl} a.span-link")
    assert page.url.endswith(f"#span-{harl}")
    evidence = page.locator(f"li#finding-{harl} ul.evidence a.source").first
    evidence.click()
    page.wait_for_load_state("load")
    assert page.url == server.base + f"/stories/{STORY}/events/{source}"
    page.go_back()

    # Dismiss Harl's finding as intentional: gone from the list, kept apart with its reason.
    page.fill(f"li#finding-{harl} form.dismiss input[name=reason]", "his ghost walks, on purpose")
    page.click(f"li#finding-{harl} form.dismiss button")
    page.wait_for_load_state("load")
    assert page.get_attribute("#result", "data-status") == "applied"
    assert page.get_attribute(card, "data-errors") == "1" and page.locator(f"li#finding-{harl}").count() == 0
    assert page.locator(f"{card} mark#span-{harl}").count() == 0
    assert page.inner_text(f"{card} mark#span-{bram}") == "Bram"
    assert "his ghost walks, on purpose" in page.locator(f"{card} details.dismissed").text_content()

    # Accept: the browser will not send the form without a reason; with one, it is recorded.
    page.click(f"{card} form.accept button")
    assert page.get_attribute("#result", "data-status") == "applied"  # still the dismissal's: nothing posted
    page.fill(f"{card} form.accept input[name=override_reason]", "Bram's bell is the ghost chapter's point")
    page.click(f"{card} form.accept button")
    page.wait_for_load_state("load")
    assert page.get_attribute("#result", "data-status") == "applied" and "accept_draft" in page.inner_text("#result")
    assert page.locator(card).count() == 0
    context.close()
    with CanonClient(server.base, token) as api:
        accepted = api.get(f"/v1/stories/{STORY}/drafts", status="accepted")["drafts"]
    drafts = {d["draft_id"]: d for d in accepted}
    assert drafts["d-ghost"]["override_reason"] == "Bram's bell is the ghost chapter's point"
    assert [d["finding_id"] for d in drafts["d-ghost"]["dismissed"]] == [harl]
