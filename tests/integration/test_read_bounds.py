"""Reads below author scope (issue 38), in-process on the real app and a real store, both stores.

A. Reads do not write unbounded: a worker key's packets are recorded (``PacketIssued``) only
within its recording budget (``infrastructure.http.recording``), over HTTP, MCP and the
viewer alike; past it the same packet is answered unrecorded (``X-Canon-Recorded: false``,
MCP ``_meta.recorded``) and its audit is ``404 unknown_packet``. Author and admin keys'
packets are recorded as before, and the packet's bytes and id never depend on it.

B. The viewer's event page shows a key below author scope what ``GET /v1/events`` shows it:
nothing (403 ``forbidden``), and the pages a worker sees link to no event page.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from canon_ledger.infrastructure.http.app import create_app
from canon_ledger.infrastructure.http.recording import DEFAULT_RECORDS, RECORDS_ENV, RecordBudgets, records_per_minute
from canon_ledger.infrastructure.web import session
from tests.helpers import DEMO_PACKET, apply_demo

STORY = "lamplight"
BOUND = 10  # the worker key's recordings in these tests (the clock stands still: no refill)
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class App:
    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.ctx = client.app.state.ctx  # type: ignore[attr-defined]
        # The demo first, as `canon demo` applies it: its events at the same positions.
        apply_demo(self.ctx.services)
        self.admin, _ = self.ctx.keys.create("admin", [], "the-admin")
        self.author, _ = self.ctx.keys.create("author", [], "the-author")
        self.worker, _ = self.ctx.keys.create("worker", [], "the-worker")
        self.ctx.records = RecordBudgets(BOUND, clock=lambda: 0.0)

    def position(self) -> int:
        return int(self.ctx.services.ledger.event_log.position())

    def call(self, path: str, token: str, **params: Any) -> Any:
        self.client.cookies.clear()
        return self.client.get(path, params=params, headers={"Authorization": f"Bearer {token}"})

    def packet(self, token: str, **params: Any) -> Any:
        answer = self.call(f"/v1/stories/{STORY}/packet", token, **params)
        assert answer.status_code == 200, answer.text[:300]
        return answer

    def apply(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.client.cookies.clear()
        answer = self.client.post("/v1/commands", json=commands, headers={"Authorization": f"Bearer {self.admin}"})
        assert answer.status_code == 200, answer.text[:500]
        return list(answer.json()["results"])

    def mcp(self, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.client.cookies.clear()
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        answer = self.client.post("/mcp", json=call, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text[:300]
        return dict(answer.json()["result"])

    def login(self, token: str) -> str:
        self.client.cookies.clear()
        answer = self.client.post("/login", data={"key": token, "next": "/"}, follow_redirects=False)
        assert answer.status_code == 303, answer.text[:300]
        found = re.search(rf"{session.COOKIE}=([^;]+)", "; ".join(answer.headers.get_list("set-cookie")))
        assert found
        return found.group(1)

    def page(self, path: str, cookie: str) -> Any:
        self.client.cookies.clear()
        self.client.cookies.set(session.COOKIE, cookie)
        answer = self.client.get(path, follow_redirects=False)
        self.client.cookies.clear()
        return answer


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    with TestClient(create_app(store_url), raise_server_exceptions=False) as client:  # the demo's embedder
        a = App(client)
        deadline = time.monotonic() + 60
        while not a.ctx.worker.caught_up():
            assert time.monotonic() < deadline, "the projection worker did not catch up"
            time.sleep(0.02)
        yield a


# -- A. reads do not write unbounded -------------------------------------------------------------

def test_a_worker_key_asking_500_distinct_packets_appends_at_most_its_bound(app: App) -> None:
    before = app.position()
    answers = [app.packet(app.worker, role="writer", chapter=5, budget=3000 + n) for n in range(500)]
    assert app.position() - before == BOUND  # today: 500 PacketIssued
    recorded = [a.headers["X-Canon-Recorded"] for a in answers]
    assert recorded == ["true"] * BOUND + ["false"] * (500 - BOUND)
    ids = [a.headers["X-Canon-Packet-Id"] for a in answers]
    assert len(set(ids)) == 500 and all(json.loads(a.text)["packet_id"] == i for a, i in zip(answers, ids))
    audit = app.call(f"/v1/packets/{ids[0]}/audit", app.worker)
    assert audit.status_code == 200 and audit.json()["verdict"] == "ok"
    for path in (f"/v1/packets/{ids[-1]}/audit", f"/v1/packets/{ids[-1]}"):
        unknown = app.call(path, app.worker)
        assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_packet"

    # A packet recorded before is recorded (and takes nothing), ETag and all; record=false and
    # at answer no X-Canon-Recorded and append nothing.
    again = app.call(f"/v1/stories/{STORY}/packet", app.worker, role="writer", chapter=5, budget=3000)
    assert again.headers["X-Canon-Recorded"] == "true" and again.text == answers[0].text
    assert "X-Canon-Recorded" not in app.packet(app.worker, role="writer", chapter=4, record="false").headers
    assert "X-Canon-Recorded" not in app.packet(app.worker, role="writer", chapter=5, at=before).headers

    # The same request by an author: the same bytes, now recorded under the same id, so the
    # worker's unrecorded packet audits from here on.
    last = app.packet(app.author, role="writer", chapter=5, budget=3499)
    assert last.text == answers[-1].text and last.headers["X-Canon-Recorded"] == "true"
    assert app.call(f"/v1/packets/{ids[-1]}/audit", app.worker).json()["verdict"] == "ok"
    assert app.position() - before == BOUND + 1


def test_author_and_admin_packets_are_recorded_as_before_and_the_demo_packet_is_unchanged(app: App,
                                                                                         store_url: str) -> None:
    before = app.position()
    for n in range(3 * BOUND):
        assert app.packet(app.author, role="writer", chapter=5, budget=4000 + n).headers["X-Canon-Recorded"] == "true"
    for n in range(BOUND + 2):
        assert app.packet(app.admin, role="planner", chapter=5, budget=4000 + n).headers["X-Canon-Recorded"] == "true"
    assert app.position() - before == 3 * BOUND + BOUND + 2
    # The demo's packet: the same id for every key, recorded or not (on SQLite, the store
    # `canon demo` uses, the very id it prints: on PostgreSQL the keyword stage names its own search).
    app.ctx.records = RecordBudgets(0)  # a worker key's packets are never recorded
    unrecorded = app.packet(app.worker, role="writer", chapter=5)
    assert unrecorded.headers["X-Canon-Recorded"] == "false"
    if store_url.startswith("sqlite"):
        assert unrecorded.headers["X-Canon-Packet-Id"] == DEMO_PACKET
    recorded = app.packet(app.author, role="writer", chapter=5)
    assert recorded.text == unrecorded.text and recorded.headers["X-Canon-Recorded"] == "true"
    assert app.packet(app.worker, role="writer", chapter=5).headers["X-Canon-Recorded"] == "true"  # recorded now


def test_mcp_get_packet_and_the_viewer_obey_the_same_bound(app: App) -> None:
    before = app.position()
    results = [app.mcp(app.worker, "get_packet", {"story": STORY, "role": "qa", "chapter": 5, "budget": 3000 + n})
               for n in range(BOUND + 20)]
    assert app.position() - before == BOUND
    assert [r["_meta"]["recorded"] for r in results] == [True] * BOUND + [False] * 20
    last = json.loads(results[-1]["content"][0]["text"])
    assert last["packet_id"] == app.packet(app.author, role="qa", chapter=5, budget=3000 + BOUND + 19,
                                           record="false").headers["X-Canon-Packet-Id"]
    audit = app.mcp(app.worker, "audit_packet", {"packet_id": last["packet_id"]})
    assert audit["isError"] and audit["structuredContent"]["error"]["code"] == "unknown_packet"
    # One budget per key, whichever door: the HTTP API and the viewer find it spent too.
    assert app.packet(app.worker, role="qa", chapter=4).headers["X-Canon-Recorded"] == "false"
    cookie = app.login(app.worker)
    logged_in = app.position()
    page = app.page(f"/stories/{STORY}/packet?role=writer&chapter=5&budget=2999", cookie)
    assert page.status_code == 200 and 'id="not-recorded"' in page.text and 'id="audit-link"' not in page.text
    assert app.position() == logged_in
    # An author's page records and links the audit; the budget has no say.
    author = app.login(app.author)
    logged_in = app.position()
    page = app.page(f"/stories/{STORY}/packet?role=writer&chapter=5&budget=2998", author)
    assert page.status_code == 200 and 'id="audit-link"' in page.text and app.position() == logged_in + 1
    assert app.mcp(app.author, "get_packet", {"story": STORY, "role": "qa", "chapter": 3})["_meta"]["recorded"]


def test_the_budget_refills_per_key_and_reads_its_size_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from canon_ledger.domain.api_key import Principal

    now = [0.0]
    budgets = RecordBudgets(6, clock=lambda: now[0])
    worker, other = Principal("w", "worker"), Principal("w2", "worker")
    assert budgets.gate(Principal("a", "author")) is None and budgets.gate(Principal("root", "admin")) is None
    take = budgets.gate(worker)
    assert take is not None and [take() for _ in range(8)] == [True] * 6 + [False] * 2
    other_take = budgets.gate(other)
    assert other_take is not None and other_take()  # keys do not share a bucket
    now[0] += 10  # 6 a minute: one more every 10 s, never more than 6 at once
    assert [take(), take()] == [True, False]
    now[0] += 3600
    assert sum(take() for _ in range(10)) == 6
    monkeypatch.setenv(RECORDS_ENV, "0")
    assert records_per_minute() == 0 and RecordBudgets().take("w") is False
    for bad in ("-1", "many", "", "100001"):
        monkeypatch.setenv(RECORDS_ENV, bad)
        assert records_per_minute() == DEFAULT_RECORDS


# -- B. the viewer's event page respects the scope ----------------------------------------------

MARKERS = {"MARK-SUBMITTED", "MARK-REJECTED-DRAFT", "MARK-DRAFT-REASON", "MARK-PENDING", "MARK-REJECTED-PROPOSAL",
           "MARK-PROPOSAL-REASON", "MARK-HIDDEN"}


def _plant(app: App) -> range:
    """A submitted draft, a rejected draft, a pending and a rejected proposal and a canon version
    hidden until chapter 12, each carrying a marker; the positions of their events."""
    start = app.position() + 1
    def propose(pid: str, key: str, marker: str, **fields: Any) -> dict[str, Any]:
        return {"type": "propose_canon", "command_id": f"mark-{pid}", "story_id": STORY, "proposal_id": pid,
                "kind": "character", "key": key, "name": f"{marker} name", "aliases": [], "text": f"{marker} text",
                "fields": fields, "valid_from": 1}

    results = app.apply([
        {"type": "submit_draft", "command_id": "mark-d1", "story_id": STORY, "chapter": 5, "draft_id": "d-mark-1",
         "text": "MARK-SUBMITTED draft text."},
        {"type": "submit_draft", "command_id": "mark-d2", "story_id": STORY, "chapter": 5, "draft_id": "d-mark-2",
         "text": "MARK-REJECTED-DRAFT draft text."},
        {"type": "reject_draft", "command_id": "mark-d2r", "story_id": STORY, "draft_id": "d-mark-2",
         "reason": "MARK-DRAFT-REASON"},
        propose("p-mark-pending", "mark-pending", "MARK-PENDING"),
        propose("p-mark-rejected", "mark-rejected", "MARK-REJECTED-PROPOSAL"),
        {"type": "reject_canon", "command_id": "mark-pr", "story_id": STORY, "proposal_id": "p-mark-rejected",
         "reason": "MARK-PROPOSAL-REASON"},
        propose("p-mark-hidden", "mark-hidden", "MARK-HIDDEN", hidden_until=12),
        {"type": "confirm_canon", "command_id": "mark-pc", "story_id": STORY, "proposal_id": "p-mark-hidden"},
    ])
    assert all(r["status"] == "applied" for r in results), results
    return range(start, app.position() + 1)


def test_the_event_page_shows_a_worker_key_what_v1_events_does(app: App) -> None:
    planted = _plant(app)
    assert app.call("/v1/events", app.worker, story=STORY).status_code == 403
    worker, author = app.login(app.worker), app.login(app.author)
    limited, _ = app.ctx.keys.create("worker", ["another"], "limited-worker")
    elsewhere = app.login(limited)
    for position in range(1, app.position() + 1):  # every event of the log, the planted ones too
        for cookie, story in ((worker, STORY), (worker, "nope"), (elsewhere, STORY)):
            page = app.page(f"/stories/{story}/events/{position}", cookie)
            assert page.status_code == 403 and 'data-code="forbidden"' in page.text, (story, position, page.text[:300])
            assert not [m for m in MARKERS if m in page.text]
    seen = set()
    for position in planted:
        page = app.page(f"/stories/{STORY}/events/{position}", author)
        assert page.status_code == 200, page.text[:300]
        seen |= {m for m in MARKERS if m in page.text}
    assert seen == MARKERS  # an author still sees everything


def test_pages_a_worker_sees_link_to_no_event_page(app: App) -> None:
    planted = _plant(app)
    recorded = app.packet(app.author, role="writer", chapter=5).headers["X-Canon-Packet-Id"]
    worker, author = app.login(app.worker), app.login(app.author)
    pages = [f"/stories/{STORY}/packet?role=writer&chapter=5", f"/stories/{STORY}/canon/character/ilse",
             f"/packets/{recorded}/audit", f"/stories/{STORY}/compare?role=writer&chapter=5&from={planted.start - 1}"]
    for path in pages:
        page = app.page(path, worker)
        assert page.status_code == 200, (path, page.text[:300])
        assert "/events/" not in page.text, path
        assert 'class="source"' in page.text or "compare" in path, path  # the positions, as text
        shown = app.page(path, author)
        assert shown.status_code == 200 and f"/stories/{STORY}/events/" in shown.text, path
    compare = app.page(pages[-1], worker)
    assert 'id="events-need-author"' in compare.text and not [m for m in MARKERS if m in compare.text]
    assert "MARK-PENDING" in app.page(pages[-1], author).text  # the author's list of events names it
