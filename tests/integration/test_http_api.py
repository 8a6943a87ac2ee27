"""The HTTP API in-process (Starlette's test client on the real app and a real store): the
auth matrix over every route, command answers, problem+json, ETag, read views, scoping.

Two servers: ``shared_api`` is started once per store for the module's tests that only read,
or write only into ids of their own that no other test's answer depends on (the auth matrix
issues and revokes keys of its own); ``api`` is a fresh one for each test whose writes or
patches would change another's answer (a new story, canon, builds, exact counts of keys,
requests or metrics, the store's gate)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from canon_ledger.infrastructure.http.app import create_app
from tests.helpers import STORY, demo_json

# On one xdist worker (--dist loadgroup): the shared server is made once per store.
pytestmark = pytest.mark.xdist_group("test_http_api")


class Api:
    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.ctx = client.app.state.ctx
        self.tokens: dict[str, str] = {}

    def key(self, scope: str, *stories: str, name: str | None = None) -> str:
        token, _ = self.ctx.keys.create(scope, list(stories), name)
        return token

    def call(self, method: str, path: str, token: str | None, **kw: Any) -> Any:
        headers = {**kw.pop("headers", {}), **({"Authorization": f"Bearer {token}"} if token else {})}
        return self.client.request(method, path, headers=headers, **kw)

    def position(self) -> int:
        return self.ctx.services.ledger.event_log.position()

    def settle(self, timeout: float = 60) -> None:
        """Wait for the server's projection worker to reflect everything applied."""
        import time

        deadline = time.monotonic() + timeout
        while not self.ctx.worker.caught_up():
            assert time.monotonic() < deadline, "the projection worker did not catch up"
            time.sleep(0.02)


def _started(store_url: str) -> Iterator[Api]:
    """A server on ``store_url``: three keys, the demo story, a guild document, all projected."""
    app = create_app(store_url, embedder="hashing")
    with TestClient(app, raise_server_exceptions=False) as client:
        a = Api(client)
        admin = a.tokens["admin"] = a.key("admin", name="the-admin")
        a.tokens["author"] = a.key("author", name="the-author")
        a.tokens["worker"] = a.key("worker", name="the-worker")
        r = a.call("POST", "/v1/commands", admin, json=demo_json())
        assert r.status_code == 200, r.text
        doc = {"document_id": "lamps.md", "text": "# Lamps\n\nThe guild lights lamps at dusk."}
        assert a.call("POST", "/v1/collections/guild/documents", admin, json=doc).status_code == 200
        a.settle()
        yield a


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    """A server of the test's own."""
    yield from _started(store_url)


@pytest.fixture(scope="module")
def shared_api(module_store_url: str) -> Iterator[Api]:
    """One server per store for the module's tests that only read or write into their own ids."""
    yield from _started(module_store_url)


# Every route, with a request that succeeds for the right key, the scope it needs and
# whether it belongs to the story (True: a key limited to another story gets 404) or changes
# or measures the whole store ("every story": a key limited to any story gets 403).
# (/readyz answers without a key too: test_readyz_tells_a_stranger_only_whether_it_is_ready.)
ROUTES = [
    ("GET", "/metrics", {}, "admin", "every story"),
    ("GET", "/v1/stories", {}, "worker", False),
    ("GET", f"/v1/stories/{STORY}", {}, "worker", True),
    ("GET", f"/v1/stories/{STORY}/canon?as_of=5", {}, "worker", True),
    ("GET", f"/v1/stories/{STORY}/canon/character/ilse", {}, "worker", True),
    ("GET", f"/v1/stories/{STORY}/chapters/5", {}, "worker", True),
    ("GET", f"/v1/stories/{STORY}/secrets?as_of=5", {}, "worker", True),
    ("GET", f"/v1/stories/{STORY}/characters/ilse/knowledge", {}, "worker", True),
    ("GET", f"/v1/stories/{STORY}/packet?role=writer&chapter=5", {}, "worker", True),
    ("GET", f"/v1/stories/{STORY}/proposals", {}, "author", True),
    ("GET", f"/v1/stories/{STORY}/drafts?chapter=2", {}, "author", True),
    ("GET", f"/v1/stories/{STORY}/drafts/d5-wip/check", {}, "author", True),
    ("GET", f"/v1/events?story={STORY}&limit=5", {}, "author", True),
    ("POST", "/v1/commands", {"json": {"type": "plan_chapter", "command_id": "m-plan-9", "story_id": STORY,
                                        "chapter": 9, "volume": 1, "goals": ["a goal"]}}, "author", True),
    ("POST", "/v1/collections/guild/documents", {"json": {"document_id": "a.md", "text": "# A\n\nLamps."}},
     "author", False),
    ("GET", "/v1/collections/guild/search?q=lamps", {}, "worker", False),
    ("GET", "/v1/lint", {}, "author", False),
    ("GET", "/v1/quota", {}, "admin", "every story"),
    ("POST", "/v1/compile?budget=1", {}, "admin", "every story"),
    ("GET", "/v1/rebuild", {}, "admin", "every story"),
    ("GET", "/v1/keys", {}, "admin", "every story"),
    ("POST", "/v1/keys", {"json": {"scope": "worker", "name": "made-by-matrix"}}, "admin", "every story"),
]
SCOPES = ("worker", "author", "admin")


def test_every_route_is_in_the_matrix(shared_api: Api) -> None:
    """A new route must join ROUTES (and so the auth matrix) before it can land."""
    api = shared_api
    # From the schema: FastAPI 0.165 keeps included routers' routes out of ``app.routes``.
    served = {(method.upper(), path) for path, operations in api.client.app.openapi()["paths"].items()
              for method in operations}
    assert len(served) > 20
    covered = {(m, p.split("?")[0].replace(STORY, "{story}").replace("/character/ilse", "/{kind}/{key}")
                .replace("/chapters/5", "/chapters/{number}").replace("/guild/", "/{collection}/")
                .replace("/drafts/d5-wip/", "/drafts/{draft}/")
                .replace("/characters/ilse/", "/characters/{character}/")) for m, p, *_ in ROUTES}
    covered |= {("GET", "/healthz"), ("GET", "/readyz"), ("POST", "/v1/rebuild"), ("DELETE", "/v1/keys/{name}"),
                ("GET", "/v1/packets/{packet_id}"), ("GET", "/v1/packets/{packet_id}/audit"),
                ("GET", "/v1/events/stream")}  # endless: its scopes are tested in tests/e2e/test_event_stream.py
    assert served - covered == set()


@pytest.mark.parametrize("method,path,kw,needs,story_bound", ROUTES, ids=[f"{m} {p}" for m, p, *_ in ROUTES])
def test_auth_matrix(shared_api: Api, method: str, path: str, kw: dict, needs: str, story_bound: bool | str) -> None:
    api = shared_api
    before = api.position()
    assert api.call(method, path, None, **kw).status_code == 401
    assert api.call(method, path, "cl_not-a-key", **kw).status_code == 401
    name = f"revoked-{needs}-{uuid.uuid4().hex[:8]}"  # key names are unique in a store: this case's own
    revoked = api.key(needs, name=name)
    api.ctx.keys.revoke(name)
    refused = api.call(method, path, revoked, **kw)
    assert refused.status_code == 401 and refused.json()["code"] == "invalid_key"
    assert refused.headers["content-type"] == "application/problem+json"
    for lower in SCOPES[:SCOPES.index(needs)]:
        r = api.call(method, path, api.tokens[lower], **kw)
        assert r.status_code == 403 and r.json()["code"] == "forbidden", (lower, r.text)
    other = api.key(needs, "another-story")
    elsewhere = api.call(method, path, other, **kw)
    if story_bound:
        if story_bound == "every story":
            assert elsewhere.status_code == 403 and elsewhere.json()["code"] == "forbidden", elsewhere.text
        elif method == "POST":  # a command for a story the key may not see: refused as unknown
            assert elsewhere.status_code == 404 or elsewhere.json()["results"][0]["error"]["code"] == "unknown_story"
        else:
            assert elsewhere.status_code == 404 and elsewhere.json()["code"] in ("unknown_story",), elsewhere.text
    # Only the test's own key changes reached the log: two keys issued (2 events each), one revoked.
    assert api.position() - before == 5, "a refused request wrote to the log"
    ok = api.call(method, path, api.tokens[needs], **kw)
    assert ok.status_code in (200, 201, 202), ok.text


def test_packets_records_and_audits_are_scoped_by_story(shared_api: Api) -> None:
    api = shared_api
    packet = api.call("GET", f"/v1/stories/{STORY}/packet?role=writer&chapter=5", api.tokens["worker"]).json()
    pid = packet["packet_id"]
    assert api.call("GET", f"/v1/packets/{pid}", api.tokens["worker"]).json()["hash"] == packet["hash"]
    audit = api.call("GET", f"/v1/packets/{pid}/audit", api.tokens["worker"]).json()
    assert audit["verdict"] == "ok" and audit["packet_id"] == pid
    other = api.key("admin", "another-story")
    for path in (f"/v1/packets/{pid}", f"/v1/packets/{pid}/audit"):
        r = api.call("GET", path, other)
        assert r.status_code == 404 and r.json()["code"] == "unknown_packet"
        assert api.call("GET", path, None).status_code == 401
    mine = api.key("worker", STORY)
    assert api.call("GET", f"/v1/packets/{pid}/audit", mine).status_code == 200
    assert api.call("GET", "/v1/packets/pkt_000000000000000000000000", mine).status_code == 404


def test_a_story_key_sees_only_its_stories(api: Api) -> None:
    limited = api.key("author", STORY)
    start = {"type": "start_story", "command_id": "other-start", "story_id": "other", "title": "Other",
             "style_guardrails": [], "output_contract": "prose"}
    refused = api.call("POST", "/v1/commands", limited, json=start)
    assert refused.status_code == 404 or refused.json()["results"][0]["error"]["code"] == "unknown_story"
    assert api.call("POST", "/v1/commands", api.tokens["admin"], json=start).status_code == 200
    listed = api.call("GET", "/v1/stories", limited).json()["stories"]
    assert [s["story_id"] for s in listed] == [STORY]
    assert {s["story_id"] for s in api.call("GET", "/v1/stories", api.tokens["worker"]).json()["stories"]} == {STORY, "other"}
    nonexistent = api.call("GET", "/v1/stories/nope", limited)
    hidden = api.call("GET", "/v1/stories/other", limited)
    assert hidden.status_code == nonexistent.status_code == 404
    assert {k: v for k, v in hidden.json().items() if k != "detail"} == \
           {k: v for k, v in nonexistent.json().items() if k != "detail"}
    events = api.call("GET", "/v1/events?limit=1000", limited).json()["events"]
    assert events and {e["story_id"] for e in events} == {STORY}
    hidden = api.call("GET", "/v1/events?story=other", limited)  # as the stream and every story route answer
    assert hidden.status_code == 404 and hidden.json()["code"] == "unknown_story"
    # shared collections are read-only to a story key; its own story collection is not
    doc = {"document_id": "x.md", "text": "# X\n\nSomething."}
    assert api.call("POST", "/v1/collections/guild/documents", limited, json=doc).status_code == 403
    assert api.call("POST", f"/v1/collections/story:{STORY}/documents", limited, json=doc).status_code == 200


def test_key_events_are_for_admins_only(api: Api) -> None:
    author = api.call("GET", "/v1/events?limit=1000", api.tokens["author"]).json()["events"]
    admin = api.call("GET", "/v1/events?limit=1000", api.tokens["admin"]).json()["events"]
    assert not any(e["type"].startswith("ApiKey") for e in author)
    issued = [e for e in admin if e["type"] == "ApiKey.Issued"]
    assert len(issued) == 3
    tokens = set(api.tokens.values())
    assert not any(t in json.dumps(admin) for t in tokens), "a token reached the log"
    keys = api.call("GET", "/v1/keys", api.tokens["admin"]).json()["keys"]
    assert {k["name"] for k in keys} >= {"the-admin", "the-author", "the-worker"}
    assert not any(t in json.dumps(keys) for t in tokens)


def test_commands_answer_like_canon_apply(api: Api) -> None:
    admin = api.tokens["author"]
    plan = {"type": "plan_chapter", "command_id": "h-plan-6", "story_id": STORY, "chapter": 6, "volume": 1,
            "goals": ["g"]}
    first = api.call("POST", "/v1/commands", admin, json=plan)
    assert first.status_code == 200 and first.json()["results"][0]["status"] == "applied"
    assert first.json()["position"] == first.json()["results"][0]["position"] == api.position()
    again = api.call("POST", "/v1/commands", admin, json=plan)
    assert again.status_code == 200 and again.json()["results"][0]["status"] == "duplicate"
    # The same plan under another command id changes nothing: unchanged, only its receipt written
    # (alone or atomic), so that the id names it; sent again, it is a duplicate of itself.
    for query, command_id in (("", "h-plan-6u"), ("?atomic=true", "h-plan-6v")):
        same = api.call("POST", f"/v1/commands{query}", admin, json=[{**plan, "command_id": command_id}])
        assert same.status_code == 200 and same.json()["results"][0]["status"] == "unchanged", same.text
        assert same.json()["position"] == api.position()
        assert [e["type"] for e in api.call("GET", f"/v1/events?after={api.position() - 1}", api.tokens["admin"])
                .json()["events"]] == ["CommandReceipt.Recorded"]
        retried = api.call("POST", f"/v1/commands{query}", admin, json=[{**plan, "command_id": command_id}])
        assert retried.json()["results"][0]["status"] == "duplicate" and retried.json()["position"] == api.position()

    before = api.position()
    bad = api.call("POST", "/v1/commands", admin, json=[{"type": "plan_chapter"}, {**plan, "command_id": "h-plan-7",
                                                                                   "chapter": 7}])
    assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
    body = bad.json()
    # an unreadable command refuses the whole request: nothing applied
    assert body["code"] == "missing_field" and [r["status"] for r in body["results"]] == ["rejected", "not_applied"]
    assert api.position() == before
    partly = api.call("POST", "/v1/commands", admin, json=[{**plan, "command_id": "h-plan-6c", "goals": ["other"]},
                                                          # chapter 6 is planned already, with other goals
                                                          {**plan, "command_id": "h-plan-7", "chapter": 7}])
    assert partly.status_code == 409  # a rule refusal: without atomic, the other command is applied
    assert [r["status"] for r in partly.json()["results"]] == ["rejected", "applied"]

    rule = api.call("POST", "/v1/commands?atomic=true", admin, json=[
        {**plan, "command_id": "h-plan-8", "chapter": 8},
        {**plan, "command_id": "h-plan-6b", "volume": 2}])  # chapter 6 is planned already, in volume 1
    assert rule.status_code == 409
    assert [r["status"] for r in rule.json()["results"]] == ["not_applied", "rejected"]
    assert api.position() == before + 2  # h-plan-7 (its command and receipt event) only, nothing of the atomic batch
    for body, code in ((b"{", "malformed_json"), (b"[]", "empty_batch"), (b"\xff", "invalid_utf8"),
                       (b"[" * 100 + b"]" * 100, "malformed_json"), (b"1" * 200, "invalid_number"),
                       (b'{"type": "x", "n": NaN}', "malformed_json")):
        r = api.call("POST", "/v1/commands", admin, content=body,
                     headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["code"] == code, (body[:20], r.text)
    assert api.position() == before + 2


def test_packet_bytes_etag_read_your_writes_and_time_travel(api: Api) -> None:
    token = api.tokens["author"]
    path = f"/v1/stories/{STORY}/packet?role=writer&chapter=5"
    first = api.call("GET", path, token)
    assert first.status_code == 200
    packet = first.json()
    assert first.headers["etag"] == f'"{packet["hash"]}"'
    assert first.content == api.ctx.services.packet(_request(5)).to_json().encode()
    cached = api.call("GET", path, token, headers={"If-None-Match": first.headers["etag"]})
    assert cached.status_code == 304 and cached.content == b""

    summary = {"type": "record_chapter_summary", "command_id": "h-sum-4", "story_id": STORY, "chapter": 4,
               "text": "Marker-77 happened in chapter four."}
    written = api.call("POST", "/v1/commands", token, json=summary).json()
    fresh = api.call("GET", f"{path}&after={written['position']}", token)
    assert "Marker-77" in fresh.text and fresh.headers["etag"] != first.headers["etag"]
    assert api.call("GET", path, token, headers={"If-None-Match": first.headers["etag"]}).status_code == 200
    past = api.call("GET", f"{path}&at={packet['position']}", token)
    assert past.status_code == 200 and past.content == first.content
    beyond = api.call("GET", f"{path}&after={api.position() + 10}", token)
    assert beyond.status_code == 422 and beyond.json()["code"] == "position_beyond_log" and beyond.json()["field"] == "after"
    beyond_at = api.call("GET", f"{path}&at={api.position() + 10}", token)
    assert beyond_at.status_code == 422 and beyond_at.json()["field"] == "at"
    for query, field in (("role=poet&chapter=5", "role"), ("role=writer&chapter=0", "chapter"),
                         ("role=writer&chapter=" + "9" * 31, "chapter"), ("role=writer", "chapter"),
                         ("role=writer&chapter=5&budget=-1", "budget")):
        r = api.call("GET", f"/v1/stories/{STORY}/packet?{query}", token)
        assert r.status_code == 422 and r.json()["field"] == field, (query, r.text)
    small = api.call("GET", f"{path}&budget=10", token)
    assert small.status_code == 409 and small.json()["code"] == "p0_exceeds_budget"


def _request(chapter: int) -> Any:
    from canon_ledger.application.packets.recipes import Request

    return Request(STORY, "writer", chapter, None, None)


def test_views_read_your_writes(api: Api) -> None:
    token = api.tokens["author"]
    propose = {"type": "propose_canon", "command_id": "h-prop", "story_id": STORY, "proposal_id": "p-new",
               "kind": "character", "key": "newcomer", "name": "A Newcomer", "text": "Arrives by boat.", "aliases": [], "fields": {},
               "valid_from": 4}
    written = api.call("POST", "/v1/commands", token, json=propose)
    assert written.status_code == 200, written.text
    pending = api.call("GET", f"/v1/stories/{STORY}/proposals?status=proposed&after={written.json()['position']}",
                       token)
    assert "p-new" in [p["proposal_id"] for p in pending.json()["proposals"]]
    canon = api.call("GET", f"/v1/stories/{STORY}/canon?as_of=5", token).json()["entries"]
    assert "newcomer" not in {e["key"] for e in canon}  # a proposal is not canon
    confirm = {"type": "confirm_canon", "command_id": "h-conf", "story_id": STORY, "proposal_id": "p-new"}
    assert api.call("POST", "/v1/commands", token, json=confirm).status_code == 200
    canon = api.call("GET", f"/v1/stories/{STORY}/canon?as_of=5", token).json()["entries"]
    assert "newcomer" in {e["key"] for e in canon}
    assert "newcomer" not in {e["key"] for e in api.call("GET", f"/v1/stories/{STORY}/canon?as_of=3", token).json()["entries"]}
    entry = api.call("GET", f"/v1/stories/{STORY}/canon/character/newcomer", token).json()
    assert [v["valid_from"] for v in entry["versions"]] == [4]
    assert api.call("GET", f"/v1/stories/{STORY}/canon/character/nobody", token).json()["code"] == "unknown_canon_entry"
    story = api.call("GET", f"/v1/stories/{STORY}", token).json()
    assert story["title"] and len(story["chapters"]) >= 5 and story["entries_by_kind"]["character"] >= 4
    chapter = api.call("GET", f"/v1/stories/{STORY}/chapters/5", token).json()
    assert chapter["scenes"] and chapter["scenes"][0]["tags"]
    assert api.call("GET", f"/v1/stories/{STORY}/chapters/99", token).json()["code"] == "unknown_chapter"


def test_errors_are_problems_without_internals(shared_api: Api) -> None:
    api = shared_api
    token = api.tokens["admin"]
    for method, path in (("GET", "/v1/nothing"), ("DELETE", "/v1/stories"), ("GET", "/v1/stories/x/canon"),
                         ("DELETE", "/v1/keys/never-made")):
        r = api.call(method, path, token)
        assert 400 <= r.status_code < 500 and r.headers["content-type"] == "application/problem+json", (path, r.text)
        body = r.json()
        assert body["code"] and body["status"] == r.status_code and "Traceback" not in r.text


def test_rebuild_runs_in_the_background(api: Api) -> None:
    import time

    token = api.tokens["admin"]
    started = api.call("POST", "/v1/rebuild?projection=canon", token)
    assert started.status_code == 202
    for _ in range(300):
        job = api.call("GET", "/v1/rebuild", token).json()
        if not job["running"]:
            break
        time.sleep(0.05)
    assert job["error"] is None and job["reports"][0]["projection"] == "canon"
    packet = api.call("GET", f"/v1/stories/{STORY}/packet?role=writer&chapter=5", token)
    assert packet.status_code == 200


def test_a_store_fault_is_503_and_a_bug_500_both_problems(api: Api, monkeypatch) -> None:
    import time

    from sqlalchemy.exc import OperationalError

    from canon_ledger.infrastructure.http.door import StoreGate

    token = api.tokens["worker"]
    path = f"/v1/stories/{STORY}/packet?role=writer&chapter=5"

    def unreachable(*_: Any, **__: Any) -> Any:
        raise OperationalError("SELECT secret_sql", {"p": "x"}, Exception("connection refused"))

    monkeypatch.setattr(api.ctx.services, "issue", unreachable)
    r = api.call("GET", path, token)
    assert r.status_code == 503 and r.json()["code"] == "store_unavailable" and "secret_sql" not in r.text
    assert r.headers["retry-after"] == "1"
    # the door's gate is open: what needs the store is answered at once, what does not still works
    assert api.call("GET", "/v1/stories", token).status_code == 503
    assert api.call("GET", "/healthz", None).status_code == 200

    def bug(*_: Any, **__: Any) -> Any:
        raise RuntimeError("internal detail 1234")

    monkeypatch.setattr(api.ctx.services, "issue", bug)
    time.sleep(StoreGate.PROBE_EVERY)  # then one probe goes through; it meets no store fault: the gate closes
    r = api.call("GET", path, token)
    assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == "internal_error" and "1234" not in r.text and "Traceback" not in r.text
    assert api.call("GET", "/v1/stories", token).status_code == 200  # the server goes on


def test_metrics_count_requests_by_route_template(api: Api) -> None:
    token = api.tokens["admin"]
    for chapter in (4, 5):
        assert api.call("GET", f"/v1/stories/{STORY}/packet?role=writer&chapter={chapter}", token).status_code == 200
    assert api.call("GET", "/v1/stories/nope", token).status_code == 404
    text = api.call("GET", "/metrics", token).text
    route = 'route="/v1/stories/{story}/packet",status="200"'
    assert f'canon_http_request_seconds_count{{method="GET",{route}}} 2.0' in text
    assert 'route="/v1/stories/{story}",status="404"' in text and "nope" not in text
    assert 'canon_packet_seconds_count{role="writer"} 2.0' in text
    assert 'canon_projection_lag_events{projection="canon"}' in text and "canon_quota_left" in text


def test_a_qa_packet_with_draft_holds_it_and_refusals_are_problems(shared_api: Api) -> None:
    api = shared_api
    token = api.tokens["worker"]
    path = f"/v1/stories/{STORY}/packet?role=qa&chapter=5"
    review = api.call("GET", f"{path}&draft=d5-wip", token)
    assert review.status_code == 200, review.text
    [item] = [i for i in review.json()["items"] if i["kind"] == "draft_under_review"]
    assert item["tier"] == "P0" and "DRAFT-PENDING-MARKER" in item["text"]
    assert review.content == api.ctx.services.packet(_qa_request("d5-wip")).to_json().encode()
    assert "DRAFT-PENDING-MARKER" not in api.call("GET", path, token).text
    audit = api.call("GET", f"/v1/packets/{review.json()['packet_id']}/audit", token)
    assert audit.status_code == 200 and audit.json()["verdict"] == "ok"
    for query, status, code, field in (("&draft=d2-first", 409, "draft_not_under_review", "draft"),
                                       ("&draft=nope", 404, "unknown_draft", "draft"),
                                       ("&draft=" + "x" * 201, 422, "invalid_field", "draft"),
                                       ("&draft=d5-wip&at=1", 422, "draft_not_replayed", "at")):
        r = api.call("GET", path + query, token)
        assert (r.status_code, r.json()["code"], r.json()["field"]) == (status, code, field), (query, r.text)
    writer = api.call("GET", f"/v1/stories/{STORY}/packet?role=writer&chapter=5&draft=d5-wip", token)
    assert writer.status_code == 422 and writer.json()["code"] == "draft_only_for_review"


def _qa_request(draft: str) -> Any:
    from canon_ledger.application.packets.recipes import Request

    return Request(STORY, "qa", 5, None, None, draft)


def test_readyz_tells_a_stranger_only_whether_it_is_ready(api: Api, monkeypatch) -> None:
    import time

    from sqlalchemy.exc import OperationalError

    from canon_ledger.infrastructure.http.door import StoreGate

    stranger = api.call("GET", "/readyz", None)
    assert stranger.status_code == 200 and stranger.json() == {"status": "ready"}
    assert stranger.headers["content-type"] == "application/json"
    for bad in ("cl_not-a-key", ""):  # a key that is sent is checked: a bad one is 401, never the short answer
        refused = api.client.get("/readyz", headers={"Authorization": f"Bearer {bad}"})
        assert refused.status_code == 401 and refused.headers["content-type"] == "application/problem+json"
    for scope in SCOPES:  # a key of worker scope or above: the detail, as before
        detail = api.call("GET", "/readyz", api.tokens[scope]).json()
        assert detail["status"] == "ready" and detail["position"] == api.position()
        assert {"canon", "retrieval"} <= set(detail["read_models"]) and detail["worker"]["alive"]
        assert {"embedder", "quarantined"} <= set(detail)
    scoped = api.call("GET", "/readyz", api.key("worker", "another-story"))
    assert scoped.status_code == 200 and "read_models" in scoped.json()

    # The store does not answer the stranger's probe: 503 not ready, and the door's gate opens ...
    def unreachable(*_: Any, **__: Any) -> Any:
        raise OperationalError("SELECT secret_sql", {}, Exception("connection refused"))

    monkeypatch.setattr(api.ctx.services.ledger.event_log, "position", unreachable)
    down = api.call("GET", "/readyz", None)
    assert (down.status_code, down.json(), down.headers["retry-after"]) == (503, {"status": "not ready"}, "1")
    assert api.ctx.gate.down
    # ... so while it is down the door answers at once: a stranger still only "not ready", a key the problem
    gated = api.call("GET", "/readyz", None)
    assert (gated.status_code, gated.json(), gated.headers["retry-after"]) == (503, {"status": "not ready"}, "1")
    keyed = api.call("GET", "/readyz", api.tokens["worker"])
    assert keyed.status_code == 503 and keyed.json()["code"] == "store_unavailable"
    assert "secret_sql" not in down.text + gated.text + keyed.text
    monkeypatch.undo()
    time.sleep(StoreGate.PROBE_EVERY)  # the next request is the probe: the store answers, the gate closes
    assert api.call("GET", "/readyz", None).json() == {"status": "ready"}
    assert not api.ctx.gate.down

    schema = api.client.app.openapi()["paths"]
    assert schema["/readyz"]["get"]["security"] == [{}, {"bearer": []}]  # no key, or a key
    assert set(schema["/readyz"]["get"]["responses"]) == {"200", "401", "503"}
    assert "security" not in schema["/healthz"]["get"]
    assert schema["/v1/stories"]["get"]["security"] == [{"bearer": []}]


def _closed(schema: Any) -> Any:
    """``schema`` with every object closed (no member it does not list) and every member
    required: what a packet must match exactly, so a field the packet gains and the schema
    lacks fails here."""
    if isinstance(schema, dict):
        closed = {k: _closed(v) for k, v in schema.items()}
        if "properties" in schema:
            closed["additionalProperties"] = False
            assert sorted(schema.get("required", [])) == sorted(schema["properties"]), schema.get("title")
        return closed
    return [_closed(v) for v in schema] if isinstance(schema, list) else schema


def test_the_packet_route_declares_the_packet_schema_and_304(shared_api: Api) -> None:
    api = shared_api
    import jsonschema

    from canon_ledger.application.packets.schema import Role
    from canon_ledger.domain.story import ROLES

    assert Role.__args__ == ROLES  # type: ignore[attr-defined]
    document = api.client.app.openapi()
    operation = document["paths"]["/v1/stories/{story}/packet"]["get"]
    ok = operation["responses"]["200"]
    packet_schema = ok["content"]["application/json"]["schema"]
    assert packet_schema == {"$ref": "#/components/schemas/Packet"}
    components = document["components"]["schemas"]
    assert components["Packet"]["properties"] and set(components["Packet"]["required"]) >= {"packet_id", "items", "hash"}
    assert {"ETag", "X-Canon-Packet-Id", "X-Canon-Position"} <= set(ok["headers"])
    assert "304" in operation["responses"] and "ETag" in operation["responses"]["304"]["headers"]
    assert "content" not in operation["responses"]["304"]

    exact = {"$ref": "#/components/schemas/Packet", "components": {"schemas": {
        name: _closed(value) for name, value in components.items() if name.startswith("Packet")}}}
    token = api.tokens["worker"]
    for query in ("role=writer&chapter=5", "role=planner&chapter=3&budget=600", "role=qa&chapter=5&draft=d5-wip",
                  "role=chat&chapter=2", "role=summarizer&chapter=4"):
        answer = api.call("GET", f"/v1/stories/{STORY}/packet?{query}", token)
        assert answer.status_code == 200, answer.text
        packet = answer.json()
        jsonschema.Draft202012Validator(exact).validate(packet)
        assert {i["status"] for i in packet["items"]} <= {"included", "trimmed", "dropped"} and packet["stages"]
    path = f"/v1/stories/{STORY}/packet?role=writer&chapter=5"
    etag = f'"{api.call("GET", path, token).json()["hash"]}"'
    not_modified = api.call("GET", path, token, headers={"If-None-Match": etag})
    assert not_modified.status_code == 304 and not_modified.headers["etag"] == etag  # as declared: no body
    broken = {**packet, "tiers": [{"tier": "P9"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(exact).validate(broken)


def test_mcp_publishes_its_protected_resource_metadata_and_its_401_points_at_it(shared_api: Api) -> None:
    api = shared_api
    base = "http://testserver"
    refused = api.call("POST", "/mcp", None, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                       headers={"Accept": "application/json, text/event-stream"})
    assert refused.status_code == 401 and refused.json()["code"] == "unauthenticated"
    challenge = refused.headers["www-authenticate"]
    assert challenge == f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource"'
    bad = api.call("POST", "/mcp", "cl_not-a-key", json={})
    assert bad.headers["www-authenticate"] == \
        f'Bearer error="invalid_token", resource_metadata="{base}/.well-known/oauth-protected-resource"'

    metadata_url = challenge.split('resource_metadata="', 1)[1].rstrip('"')
    for path in (metadata_url.removeprefix(base), "/.well-known/oauth-protected-resource/mcp"):
        r = api.call("GET", path, None)  # no key
        assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
        metadata = r.json()
        assert metadata["resource"] == f"{base}/mcp" and metadata["bearer_methods_supported"] == ["header"]
        assert metadata["resource_name"] == "Canon Ledger" and "canon key create" in metadata["description"]
        assert "authorization_servers" not in metadata  # keys are not issued by an OAuth flow
        assert r.headers["access-control-allow-origin"] == "*"
    behind = api.client.get("/.well-known/oauth-protected-resource", headers={"X-Forwarded-Proto": "https"})
    assert behind.status_code == 200
    preflight = api.client.options("/.well-known/oauth-protected-resource",
                                   headers={"Origin": "http://localhost:6274", "Access-Control-Request-Method": "GET"})
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
    assert "/.well-known/oauth-protected-resource" not in api.client.app.openapi()["paths"]

    # none of it needs the store: it answers while the door's gate is open, as /docs does
    api.ctx.gate.failed()
    try:
        assert api.call("GET", "/.well-known/oauth-protected-resource/mcp", None).status_code == 200
        assert api.call("GET", "/docs", None).status_code == 200
        assert api.call("GET", "/docs/assets/swagger-ui.css", None).status_code == 200
        assert api.call("GET", "/v1/stories", api.tokens["worker"]).status_code == 503
    finally:
        api.ctx.gate.recovered()


def test_words_that_help_answer_over_http_as_on_the_command_line(shared_api: Api) -> None:
    """Issue 38: the hints of `canon apply` come with POST /v1/commands too (an alias used as
    a scene-card tag names the entry, curly quotes, a mistyped type), and proposals have one
    vocabulary of states (`pending`, the older word, is read as `proposed`)."""
    api = shared_api
    author = api.tokens["author"]
    card = {"type": "add_scene_card", "command_id": "h-card-5b", "story_id": STORY, "chapter": 5, "scene_id": "5b",
            "summary": "Again.", "characters": ["the Marrow girl"], "locations": [], "threads": [], "callbacks": [],
            "items": []}
    refused = api.call("POST", "/v1/commands", author, json=card)
    assert refused.status_code == 409 and refused.json()["code"] == "scene_card_tags_must_be_confirmed_canon"
    hint = "did you mean key 'ilse' (alias 'the Marrow girl' of character ilse)?"
    assert hint in refused.json()["results"][0]["error"]["message"] and hint in refused.json()["detail"]
    curly = api.call("POST", "/v1/commands", author, content="{\u201ctype\u201d: \u201cplan_chapter\u201d}".encode(),
                     headers={"Content-Type": "application/json"})
    assert curly.status_code == 422 and "curly quotes" in curly.json()["detail"]
    typo = api.call("POST", "/v1/commands", author, json={**card, "type": "add_scene_cards"})
    assert typo.status_code == 422 and "did you mean 'add_scene_card'?" in typo.json()["detail"]

    proposed = api.call("GET", f"/v1/stories/{STORY}/proposals?status=proposed", author)
    pending = api.call("GET", f"/v1/stories/{STORY}/proposals?status=pending", author)
    assert proposed.status_code == pending.status_code == 200 and proposed.json() == pending.json()
    assert {p["status"] for p in proposed.json()["proposals"]} == {"proposed"}
    assert api.call("GET", f"/v1/stories/{STORY}/proposals?status=waiting", author).status_code == 422
    [row] = [s for s in api.call("GET", "/v1/stories", author).json()["stories"] if s["story_id"] == STORY]
    assert row["proposals_proposed"] == len(proposed.json()["proposals"]) == row["pending_proposals"]


def test_a_draft_check_answers_its_findings_within_the_key_scope(shared_api: Api) -> None:
    """Issue 42's HTTP door: the report (200, error findings and all) in the declared schema, a
    dismissed finding listed apart, author scope, another story's key answered as for no story."""
    import jsonschema

    from tests.e2e.test_cli_check import COMMANDS, DEAD
    from tests.e2e.test_cli_check import STORY as CHECKED

    api = shared_api
    applied = api.call("POST", "/v1/commands", api.tokens["admin"], json=COMMANDS)
    assert applied.status_code == 200, applied.text
    after = applied.json()["position"]
    author = api.key("author", CHECKED)  # a key limited to the checked story
    path = f"/v1/stories/{CHECKED}/drafts/d3-walks/check"
    found = api.call("GET", f"{path}?after={after}", author)
    assert found.status_code == 200 and found.headers["content-type"] == "application/json", found.text
    report = found.json()
    assert (report["draft_id"], report["chapter"], report["errors"], report["dismissed"]) == ("d3-walks", 3, 1, [])
    [finding] = report["findings"]
    assert finding["type"] == "unavailable_character" and finding["entry"]["key"] == "bram"
    assert finding["span"]["text"] == "Bram" == DEAD[finding["span"]["start"]:finding["span"]["end"]]
    assert report["findings"] == api.ctx.services.continuity().check(CHECKED, "d3-walks").as_dict()["findings"]

    document = api.client.app.openapi()
    ok = document["paths"]["/v1/stories/{story}/drafts/{draft}/check"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ContinuityReport"}
    exact = {"$ref": "#/components/schemas/ContinuityReport", "components": {"schemas": {
        name: _closed(value) for name, value in document["components"]["schemas"].items()
        if name.startswith(("Continuity", "Finding", "DismissedFinding", "PacketStage"))}}}
    jsonschema.Draft202012Validator(exact).validate(report)

    dismiss = {"type": "dismiss_finding", "command_id": "http-check-dismiss", "story_id": CHECKED,
               "draft_id": "d3-walks", "finding_id": finding["id"], "reason": "his ghost, on purpose"}
    dismissed = api.call("POST", "/v1/commands", author, json=dismiss)
    assert dismissed.status_code == 200, dismissed.text
    again = api.call("GET", f"{path}?after={dismissed.json()['position']}", author).json()
    assert (again["findings"], again["errors"]) == ([], 0)
    [gone] = again["dismissed"]
    assert gone["id"] == finding["id"] and gone["dismissed"]["reason"] == "his ghost, on purpose"
    jsonschema.Draft202012Validator(exact).validate(again)

    clean = api.call("GET", f"/v1/stories/{CHECKED}/drafts/d3-remembers/check", author)
    assert clean.status_code == 200 and clean.json()["findings"] == [] and clean.json()["errors"] == 0
    for token, status, code in ((api.key("author", "another-story"), 404, "unknown_story"),
                                (api.key("admin", STORY), 404, "unknown_story"),
                                (api.key("worker", CHECKED), 403, "forbidden"),
                                (None, 401, "unauthenticated")):
        refused = api.call("GET", path, token)
        assert (refused.status_code, refused.json()["code"]) == (status, code), refused.text
        assert refused.headers["content-type"] == "application/problem+json"
    for query, status, code, field in (("", 404, "unknown_draft", "draft_id"),
                                       ("?after=999999999", 422, "position_beyond_log", "after"),
                                       ("?provider=poet", 422, "invalid_field", "provider")):
        r = api.call("GET", f"/v1/stories/{CHECKED}/drafts/{'nope' if not query else 'd3-walks'}/check{query}", author)
        assert (r.status_code, r.json()["code"], r.json()["field"]) == (status, code, field), (query, r.text)
    ghost = api.call("GET", "/v1/stories/no-such-story/drafts/d3-walks/check", api.tokens["admin"])
    assert (ghost.status_code, ghost.json()["code"]) == (404, "unknown_story")
