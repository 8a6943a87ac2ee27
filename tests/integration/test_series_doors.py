"""A series through the HTTP door: a key limited to one book gets packets and canon views with
what the book inherits (labelled), but not the other stories' own views, drafts or proposals,
and cannot add its book to a series it may not see."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from canon_ledger.infrastructure.http.app import create_app
from tests.integration.test_http_api import Api

pytestmark = pytest.mark.xdist_group("test_series_doors")

SECRET_DRAFT = "A draft of book 1 nobody confirmed."
UNCONFIRMED = "An unconfirmed proposal of book 1."


def _entry(story: str, key: str, text: str, confirm: bool = True) -> list[dict[str, Any]]:
    pid = f"{story}-{key}"
    out = [{"type": "propose_canon", "command_id": f"p-{pid}", "story_id": story, "proposal_id": pid,
            "kind": "character", "key": key, "name": key.title(), "aliases": [], "text": text, "fields": {},
            "valid_from": 1}]
    return out + ([{"type": "confirm_canon", "command_id": f"c-{pid}", "story_id": story, "proposal_id": pid}]
                  if confirm else [])


def _start(story: str) -> list[dict[str, Any]]:
    return [{"type": "start_story", "command_id": f"s-{story}", "story_id": story, "title": story.upper(),
             "style_guardrails": [], "output_contract": ""},
            {"type": "plan_chapter", "command_id": f"plan-{story}", "story_id": story, "chapter": 1, "volume": 1,
             "goals": ["The mage and the knight meet."]}]


SERIES = [{"type": "start_series", "command_id": "series", "story_id": "saga", "title": "The Saga"},
          *_entry("saga", "mage", "The mage of the bible."),
          *_start("b1"), {"type": "add_book", "command_id": "add-b1", "story_id": "b1", "series_id": "saga"},
          *_entry("b1", "knight", "The knight, as book 1 ends."),
          *_entry("b1", "rogue", UNCONFIRMED, confirm=False),
          {"type": "submit_draft", "command_id": "d-b1", "story_id": "b1", "chapter": 1, "draft_id": "d1",
           "text": SECRET_DRAFT},
          *_start("b2"), {"type": "add_book", "command_id": "add-b2", "story_id": "b2", "series_id": "saga"},
          {"type": "add_scene_card", "command_id": "card-b2", "story_id": "b2", "chapter": 1, "scene_id": "a",
           "summary": "They meet.", "characters": ["mage", "knight"], "locations": [], "threads": [],
           "callbacks": [], "items": []}]


@pytest.fixture(scope="module")
def api(module_store_url: str) -> Iterator[Api]:
    app = create_app(module_store_url, embedder="hashing")
    with TestClient(app, raise_server_exceptions=False) as client:
        a = Api(client)
        a.tokens["admin"] = a.key("admin", name="admin")
        r = a.call("POST", "/v1/commands", a.tokens["admin"], json=SERIES)
        assert r.status_code == 200 and all(x["status"] == "applied" for x in r.json()["results"]), r.text
        a.settle()
        yield a


def test_a_book_key_reads_what_its_book_inherits_and_nothing_else(api: Api) -> None:
    book2 = api.key("author", "b2")
    packet = api.call("GET", "/v1/stories/b2/packet?role=writer&chapter=1", book2)
    assert packet.status_code == 200, packet.text
    items = {i["key"]: i for i in packet.json()["items"] if i["kind"] == "character"}
    assert "The mage of the bible." in items["mage"]["text"] and "series bible" in items["mage"]["reason"]
    assert "The knight, as book 1 ends." in items["knight"]["text"] and "from book 1" in items["knight"]["reason"]
    assert SECRET_DRAFT not in packet.text and UNCONFIRMED not in packet.text
    canon = api.call("GET", "/v1/stories/b2/canon?as_of=1", book2).json()["entries"]
    assert {e["key"]: e["inherited_from"]["story_id"] for e in canon} == {"mage": "saga", "knight": "b1"}
    for path in ("/v1/stories/b1/proposals", "/v1/stories/b1/drafts", "/v1/stories/saga/canon?as_of=1",
                 "/v1/stories/b1/packet?role=writer&chapter=1"):
        refused = api.call("GET", path, book2)
        assert refused.status_code == 404 and refused.json()["code"] == "unknown_story", (path, refused.text)
    stories = api.call("GET", "/v1/stories", book2).json()["stories"]
    assert [(s["story_id"], s["series"]) for s in stories] == [("b2", {"series_id": "saga", "role": "book",
                                                                        "ordinal": 2})]


def test_a_book_key_cannot_add_its_book_to_a_series_it_may_not_see(api: Api) -> None:
    api.call("POST", "/v1/commands", api.tokens["admin"], json=[*_start("b3")])
    book3 = api.key("author", "b3")
    r = api.call("POST", "/v1/commands", book3, json={"type": "add_book", "command_id": "add-b3", "story_id": "b3",
                                                     "series_id": "saga"})
    (result,) = r.json()["results"]
    assert result["status"] == "rejected" and result["error"]["code"] == "unknown_series", r.text


def test_the_viewer_canon_page_shows_where_each_entry_comes_from(tmp_path: Any) -> None:
    from tests.conftest import initialised

    app = create_app(initialised(f"sqlite:///{tmp_path / 'pages.db'}"), open_access=True, embedder="hashing")
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:  # --open: loopback
        services = client.app.state.ctx.services  # type: ignore[attr-defined]
        from tests.helpers import applied

        applied(services, *SERIES)
        page = client.get("/stories/b2/canon?as_of=1")
        assert page.status_code == 200, page.text[:300]
        assert 'data-source="bible">series bible <small>saga</small>' in page.text
        assert 'data-source="book">book 1 <small>b1, as of its last chapter</small>' in page.text
        own = client.get("/stories/b1/canon?as_of=1").text
        assert 'data-source="own">this story' in own and 'href="/stories/saga/canon/character/mage"' in own
