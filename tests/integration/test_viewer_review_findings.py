"""The review queue's continuity findings (issue 42), in-process on the real app and a real store,
on both stores: each submitted draft shows its check's findings (severity, type, entry, message),
its text escaped with each finding's span in a ``<mark>``, each evidence linked to its event; a
finding dismissed with a reason (``dismiss_finding``, the queue's own POST and CSRF) is no longer
shown but listed apart with its reason; accepting a draft with error findings needs an
``override_reason`` (refused without one, nothing applied; recorded as ``Draft.FindingsOverridden``
with one), and a draft with no finding accepts as before."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.http.app import create_app
from canon_ledger.infrastructure.web import session

STORY = "hall"
HARL = "Harl walked into the hall. <b>Mara</b> & the lamps watched."
REVIEW = f"/stories/{STORY}/review"


class Queue:
    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.ctx = client.app.state.ctx  # type: ignore[attr-defined]
        token, _ = self.ctx.keys.create("author", [], "the-author")
        login = client.post("/login", data={"key": token, "next": "/"}, follow_redirects=False)
        assert login.status_code == 303, login.text[:300]
        self.csrf = session.csrf_token(client.cookies[session.COOKIE])

    def apply(self, *commands: dict[str, Any]) -> None:
        results = self.ctx.services.ledger.apply([parse_command({"story_id": STORY, **c}) for c in commands])
        assert all(r.ok for r in results), [r.as_dict() for r in results if not r.ok]

    def page(self, query: dict[str, str] | None = None) -> str:
        answer = self.client.get(REVIEW, params=query, follow_redirects=False)
        assert answer.status_code == 200, answer.text[:500]
        return str(answer.text)

    def post(self, command_id: str, **form: str) -> dict[str, str]:
        """The form posted as the page's would be; the redirect's query (what became of it)."""
        answer = self.client.post(REVIEW, data={"csrf": self.csrf, "command_id": command_id, **form},
                                  follow_redirects=False)
        assert answer.status_code == 303, answer.text[:500]
        location = answer.headers["location"]
        assert location.startswith(REVIEW + "?")
        return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}

    def position(self) -> int:
        return int(self.ctx.services.ledger.event_log.position())

    def events(self, name: str) -> list[tuple[int, Any]]:
        return [(p, e) for p, e in self.ctx.services.ledger.event_log.read(1, 10_000) if type(e).__qualname__ == name]


@pytest.fixture
def queue(store_url: str) -> Iterator[Queue]:
    app = create_app(store_url, embedder="hashing", worker=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        q = Queue(client)
        q.apply({"type": "start_story", "command_id": "start", "title": "The Hall", "style_guardrails": [],
                 "output_contract": ""},
                {"type": "propose_canon", "command_id": "p-harl", "proposal_id": "p-harl", "kind": "character",
                 "key": "harl", "name": "Harl", "aliases": [], "text": "Harl, the old porter.",
                 "fields": {"state": "dead"}, "valid_from": 2},
                {"type": "confirm_canon", "command_id": "c-harl", "proposal_id": "p-harl"},
                *({"type": "plan_chapter", "command_id": f"plan-{n}", "chapter": n, "volume": 1, "goals": []}
                  for n in (1, 2, 3)),
                {"type": "submit_draft", "command_id": "d-harl", "chapter": 3, "draft_id": "d-harl", "text": HARL},
                {"type": "submit_draft", "command_id": "d-again", "chapter": 3, "draft_id": "d-again",
                 "text": "Rain. Harl walked into the hall again."},
                {"type": "submit_draft", "command_id": "d-quiet", "chapter": 2, "draft_id": "d-quiet",
                 "text": "A quiet chapter: the lamps, the rain."})
        yield q


def _section(page: str, draft: str) -> str:
    found = re.search(rf'<section class="draft" id="draft-{draft}".*?</section>', page, re.S)
    assert found, page[-2000:]
    return found.group(0)


def _finding(q: Queue, draft: str) -> dict[str, Any]:
    report = q.ctx.services.continuity().check(STORY, draft).as_dict()
    assert [f["type"] for f in report["findings"]] == ["unavailable_character"], report
    return dict(report["findings"][0])


def test_findings_are_shown_with_their_span_and_evidence_and_a_dismissed_one_is_not(queue: Queue) -> None:
    finding = _finding(queue, "d-harl")
    established = [p for p, _ in queue.events("CanonEntry.Established")]
    card = _section(queue.page(), "d-harl")
    assert 'data-errors="1"' in card and 'data-findings="1"' in card
    item = re.search(rf'<li class="finding sev-error" id="finding-{finding["id"]}".*?</li>\n', card, re.S)
    assert item, card
    text = html.unescape(item.group(0))
    assert 'data-type="unavailable_character"' in text and ">error<" in text and "<code>harl</code>" in text
    assert finding["message"] in text
    for e in finding["evidence"]:  # each evidence item links to its event, with its chapter
        assert f'href="/stories/{STORY}/events/{e["source"]}"' in text and f"chapter {e['valid_from']}" in text
    assert [e["source"] for e in finding["evidence"]] == established, finding
    # The text, escaped, the span marked and anchored; nothing of the draft's own markup is live.
    start, end = finding["span"]["start"], finding["span"]["end"]
    marked = (f'<pre>{html.escape(HARL[:start], quote=False)}<mark class="sev-error" data-findings="{finding["id"]}" '
              f'id="span-{finding["id"]}">{html.escape(HARL[start:end], quote=False)}</mark>')
    assert marked in card.replace("&#34;", '"').replace("&#39;", "'"), card
    assert "<b>Mara</b>" not in card and "&lt;b&gt;Mara&lt;/b&gt; &amp; the lamps" in card
    assert f'href="#span-{finding["id"]}"' in card
    # The accept form asks for a reason and says why; the clean draft's asks for none.
    assert 'name="override_reason" required' in card and 'class="override-note"' in card
    quiet = _section(queue.page(), "d-quiet")
    assert 'data-errors="0"' in quiet and "no finding" in quiet and "override_reason" not in quiet

    # Dismissed: a reason is required; with one, the finding is gone from the queue, listed apart.
    before = queue.position()
    blank = queue.post("x-0", action="dismiss_finding", id="d-harl", finding_id=finding["id"], reason="  ")
    assert blank["status"] == "rejected" and queue.position() == before
    done = queue.post("x-1", action="dismiss_finding", id="d-harl", finding_id=finding["id"],
                      reason="his ghost, on purpose")
    assert done == {"what": "dismiss_finding", "status": "applied"}, done
    (_, event), = queue.events("Draft.FindingDismissed")
    assert event.finding_id == finding["id"] and event.reason == "his ghost, on purpose"
    card = _section(queue.page(), "d-harl")
    assert 'data-errors="0"' in card and 'data-findings="0"' in card and "<mark" not in card
    assert f'id="finding-{finding["id"]}"' not in card and "override_reason" not in card
    dismissed = re.search(r'<details class="dismissed">.*?</details>', card, re.S)
    assert dismissed and "his ghost, on purpose" in dismissed.group(0) and finding["id"] in dismissed.group(0)
    # The other draft naming Harl still has its own finding.
    assert 'data-errors="1"' in _section(queue.page(), "d-again")


def test_an_accept_over_error_findings_needs_a_reason_and_a_clean_draft_accepts_as_before(queue: Queue) -> None:
    before = queue.position()
    refused = queue.post("a-1", action="accept_draft", id="d-harl")
    assert refused["status"] == "refused" and refused["code"] == "override_reason_required", refused
    blank = queue.post("a-2", action="accept_draft", id="d-harl", override_reason="   ")
    assert blank["status"] == "refused" and queue.position() == before  # nothing applied
    page = queue.page(refused)  # where the redirect lands
    assert 'data-status="refused"' in page and "override_reason_required" in page and "needs a reason" in page
    assert 'data-errors="1"' in _section(page, "d-harl")

    done = queue.post("a-3", action="accept_draft", id="d-harl", override_reason="the ghost chapter is meant")
    assert done == {"what": "accept_draft", "status": "applied"}, done
    (overridden_at, overridden), = queue.events("Draft.FindingsOverridden")
    assert overridden.draft_id == "d-harl" and overridden.reason == "the ghost chapter is meant"
    accepted = dict((e.draft_id, p) for p, e in queue.events("Draft.Accepted"))
    assert accepted["d-harl"] == overridden_at + 1
    assert 'data-draft="d-harl"' not in queue.page()  # no longer submitted

    clean = queue.post("a-4", action="accept_draft", id="d-quiet")
    assert clean == {"what": "accept_draft", "status": "applied"}, clean
    assert [e.draft_id for _, e in queue.events("Draft.FindingsOverridden")] == ["d-harl"]
    assert "d-quiet" in dict((e.draft_id, p) for p, e in queue.events("Draft.Accepted"))
