"""Who knows what, as of a chapter (issue 43, deliverable 5): the read (``application.who_knows``)
on both stores, then its doors in-process: ``GET /v1/stories/{s}/secrets``,
``GET /v1/stories/{s}/characters/{c}/knowledge``, the MCP tools ``secrets`` and
``character_knowledge`` over ``/mcp``, and the viewer's ``/stories/{s}/secrets`` grid.

The story: characters mira, orrin and harl; harl's second version, from chapter 5, a secret
("Harl is a spy."); mira knows it from chapter 9 (told by Orrin); chapters 1..12 planned; orrin
the point of view of a scene of chapter 3. And a secret hidden until chapter 11 (the vault), which
orrin knows from chapter 3: below author scope it is listed as the canon view lists a hidden
version, and who knows it is withheld."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from canon_ledger.application import who_knows
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.errors import NotFound
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.http.app import create_app
from canon_ledger.infrastructure.web import session

STORY = "osk"
VAULT = "ZQVAULTX: the vault under the customs house holds the Duke's gold."
HOW = 'built it <b>&</b> "sealed" it'  # escaped on the page
WORKER, AUTHOR = Principal("w", "worker"), Principal("a", "author")


def _entry(key: str, name: str, text: str, fields: dict[str, Any], valid_from: int = 1, n: int = 1,
           kind: str = "character") -> list[dict[str, Any]]:
    pid = f"{key}-{n}"
    return [{"type": "propose_canon", "command_id": f"p-{pid}", "story_id": STORY, "proposal_id": pid, "kind": kind,
             "key": key, "name": name, "aliases": [], "text": text, "fields": fields, "valid_from": valid_from},
            {"type": "confirm_canon", "command_id": f"c-{pid}", "story_id": STORY, "proposal_id": pid}]


def knows(character: str, key: str, chapter: int, how: str, kind: str = "character",
          command_id: str | None = None) -> dict[str, Any]:
    return {"type": "record_knowledge", "command_id": command_id or f"k-{character}-{key}", "story_id": STORY,
            "character": character, "kind": kind, "key": key, "chapter": chapter, "how": how}


def commands() -> list[dict[str, Any]]:
    return [{"type": "start_story", "command_id": "start", "story_id": STORY, "title": "Osk",
             "style_guardrails": [], "output_contract": "Prose."},
            *({"type": "plan_chapter", "command_id": f"plan-{n}", "story_id": STORY, "chapter": n, "volume": 1,
               "goals": [f"Chapter {n}"]} for n in range(1, 13)),
            *_entry("mira", "Mira", "A harbour scout.", {}),
            *_entry("orrin", "Orrin", "A clerk.", {}),
            *_entry("harl", "Harl", "The steward.", {}),
            *_entry("harl", "Harl", "Harl is a spy.", {"secret": True}, valid_from=5, n=2),
            *_entry("vault", "The ZQVAULTX vault", VAULT, {"secret": True, "hidden_until": 11}, kind="location"),
            {"type": "add_scene_card", "command_id": "card-3a", "story_id": STORY, "chapter": 3, "scene_id": "a",
             "summary": "Orrin counts the dues.", "characters": ["orrin"], "locations": [], "threads": [],
             "callbacks": [], "items": [], "pov": "orrin"},
            knows("mira", "harl", 9, "told by Orrin"),
            knows("orrin", "vault", 3, HOW, kind="location")]


def _apply(services: Any, *cmds: dict[str, Any]) -> None:
    results = services.ledger.apply([parse_command(c) for c in cmds])
    assert all(r.ok for r in results), [r.as_dict() for r in results if not r.ok]


def _known_by(view: dict[str, Any], key: str) -> list[tuple[str, int, str]]:
    [secret] = [s for s in view["secrets"] if s["key"] == key]
    return [(k["character"], k["chapter"], k["how"]) for k in secret["known_by"]]


def test_who_knows_a_secret_and_what_a_character_knows_as_of_a_chapter(store_url: str) -> None:
    s = bootstrap(store_url, embedder="hashing")
    try:
        _apply(s, *commands())
        views = s.views()
        secrets = who_knows.secrets

        assert [e["key"] for e in secrets(AUTHOR, views, STORY, 4)["secrets"]] == ["vault"]  # harl's v1: no secret
        before, after = secrets(AUTHOR, views, STORY, 8), secrets(AUTHOR, views, STORY, 9)
        assert _known_by(before, "harl") == [] and _known_by(after, "harl") == [("mira", 9, "told by Orrin")]
        [harl] = [e for e in after["secrets"] if e["key"] == "harl"]
        assert (harl["kind"], harl["step"], harl["valid_from"], harl["hidden"]) == ("character", 2, 5, False)
        assert "Harl is a spy." in harl["text"] and harl["known_by"][0]["name"] == "Mira"
        assert [(c["key"], c["pov"], c["knows"]) for c in after["characters"]] == [
            ("mira", False, 1), ("orrin", True, 1)]
        assert secrets(AUTHOR, views, STORY)["as_of"] == 12  # the default: the latest planned chapter
        grid = who_knows.grid(after)
        assert [(r["key"], [c and c["chapter"] for c in r["cells"]]) for r in grid] == [
            ("mira", [9, None]), ("orrin", [None, 3])]  # columns: harl, vault (by kind: character, location)

        mira = who_knows.character_knowledge
        assert mira(WORKER, views, STORY, "mira", 8)["knows"] == []
        [known] = mira(WORKER, views, STORY, "mira", 9)["knows"]
        assert {k: known[k] for k in ("kind", "key", "name", "secret", "chapter", "how", "hidden")} == {
            "kind": "character", "key": "harl", "name": "Harl", "secret": True, "chapter": 9, "how": "told by Orrin",
            "hidden": False}

        # A correction: the latest record holds, for the view as for packets.
        _apply(s, knows("mira", "harl", 7, "overheard at the quay", command_id="k-again"))
        views = s.views()
        assert _known_by(secrets(WORKER, views, STORY, 8), "harl") == [("mira", 7, "overheard at the quay")]
        [known] = mira(WORKER, views, STORY, "mira", 8)["knows"]
        assert (known["chapter"], known["how"]) == (7, "overheard at the quay") and known["source"] > harl["source"]
        assert mira(WORKER, views, STORY, "mira", 6)["knows"] == []

        # Hidden until 11: listed without name and text below author scope, who knows it withheld.
        hidden = secrets(WORKER, views, STORY, 9)
        [vault] = [e for e in hidden["secrets"] if e["key"] == "vault"]
        assert (vault["name"], vault["text"], vault["known_by"], vault["reason"]) == ("", "", [],
                                                                                       "hidden until chapter 11")
        assert [(c["key"], c["knows"]) for c in hidden["characters"]] == [("mira", 1), ("orrin", 0)]
        assert "ZQVAULTX" not in str(hidden) and "ZQVAULTX" not in str(mira(WORKER, views, STORY, "orrin", 9))
        assert mira(WORKER, views, STORY, "orrin", 9)["knows"] == []
        [labelled] = mira(AUTHOR, views, STORY, "orrin", 9)["knows"]
        assert (labelled["key"], labelled["hidden"], labelled["reason"]) == ("vault", True, "hidden until chapter 11")
        assert _known_by(secrets(AUTHOR, views, STORY, 9), "vault") == [("orrin", 3, HOW)]
        assert _known_by(secrets(WORKER, views, STORY, 11), "vault") == [("orrin", 3, HOW)]  # revealed

        for ask, code in ((lambda: mira(WORKER, views, STORY, "nobody", 9), "unknown_character"),
                          (lambda: mira(WORKER, views, "nope", "mira", 9), "unknown_story"),
                          (lambda: secrets(WORKER, views, "nope", 9), "unknown_story")):
            with pytest.raises(NotFound) as refused:
                ask()
            assert refused.value.code == code
    finally:
        s.close()


# -- the doors: HTTP, MCP, the viewer ------------------------------------------------------------

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Served:
    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.ctx: Any = client.app.state.ctx  # type: ignore[attr-defined]
        keys = self.ctx.keys
        self.admin = keys.create("admin", [], "admin")[0]
        self.worker = keys.create("worker", [STORY], "osk-worker")[0]
        self.author = keys.create("author", [STORY], "osk-author")[0]
        self.elsewhere = keys.create("worker", ["another"], "another-worker")[0]
        answer = self.get("/v1/commands", self.admin, method="POST", json=commands())
        assert answer.status_code == 200, answer.text

    def get(self, path: str, token: str | None, method: str = "GET", **kw: Any) -> Any:
        self.client.cookies.clear()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.client.request(method, path, headers=headers, **kw)

    def tool(self, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        answer = self.client.post("/mcp", json=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()["result"]
        return result

    def page(self, token: str, path: str) -> Any:
        self.client.cookies.clear()
        self.client.cookies.set(session.COOKIE, self.ctx.keys.open_session(token, session.MAX_AGE)[0])
        try:
            return self.client.get(path, follow_redirects=False)
        finally:
            self.client.cookies.clear()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('who_knows')) / 'canon.db'}"
    with TestClient(create_app(url, embedder="hashing"), raise_server_exceptions=False) as client:
        yield Served(client)


def _schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    ok = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return {**ok, "components": document["components"]}


def test_the_api_and_mcp_answer_the_same_and_only_for_the_keys_story(served: Served) -> None:
    document = served.client.app.openapi()  # type: ignore[attr-defined]
    secrets_path, knowledge_path = f"/v1/stories/{STORY}/secrets", f"/v1/stories/{STORY}/characters/mira/knowledge"
    answer = served.get(secrets_path, served.worker, params={"as_of": 9})
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json", answer.text
    body = answer.json()
    jsonschema.validate(body, _schema(document, "/v1/stories/{story}/secrets"))
    assert _known_by(body, "harl") == [("mira", 9, "told by Orrin")] and "ZQVAULTX" not in answer.text
    assert served.get(secrets_path, served.author, params={"as_of": 9}).json()["secrets"][1]["name"] == \
        "The ZQVAULTX vault"
    assert served.get(secrets_path, served.worker).json()["as_of"] == 12

    mine = served.get(knowledge_path, served.worker, params={"as_of": 9})
    assert mine.status_code == 200 and [k["key"] for k in mine.json()["knows"]] == ["harl"], mine.text
    jsonschema.validate(mine.json(), _schema(document, "/v1/stories/{story}/characters/{character}/knowledge"))
    assert served.get(knowledge_path, served.worker, params={"as_of": 8}).json()["knows"] == []

    # MCP: the same JSON, through the same read.
    tool = served.tool(served.worker, "character_knowledge", {"story": STORY, "character": "mira", "as_of": 9})
    assert not tool["isError"] and tool["structuredContent"] == mine.json()
    tool = served.tool(served.worker, "secrets", {"story": STORY, "as_of": 9})
    assert not tool["isError"] and tool["structuredContent"] == body

    # Scope: another story's key gets the 404 of a story never started; no key, 401; bad bounds, 422.
    for path in (secrets_path, knowledge_path):
        refused = served.get(path, served.elsewhere)
        assert (refused.status_code, refused.json()["code"]) == (404, "unknown_story"), path
        assert served.get(path, None).status_code == 401
        assert served.get(path, served.worker, params={"as_of": 0}).status_code == 422
    for name, arguments in (("secrets", {"story": STORY}), ("character_knowledge", {"story": STORY,
                                                                                   "character": "mira"})):
        refused_tool = served.tool(served.elsewhere, name, arguments)
        assert refused_tool["isError"] and refused_tool["structuredContent"]["error"]["status"] == 404
    unknown = served.get(f"/v1/stories/{STORY}/characters/nobody/knowledge", served.worker)
    assert (unknown.status_code, unknown.json()["code"]) == (404, "unknown_character")


def test_the_viewer_grid_shows_who_learned_what_when(served: Served) -> None:
    page = served.page(served.author, f"/stories/{STORY}/secrets?as_of=9")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), page.text[:300]
    html = page.text
    assert '<tr data-character="mira">' in html and '<tr data-character="orrin">' in html
    assert 'data-secret="harl" data-chapter="9" title="told by Orrin">ch. 9</td>' in html
    assert 'data-secret="vault" data-chapter="3" title="built it &lt;b&gt;&amp;&lt;/b&gt; &#34;sealed&#34; it">' in html
    assert "<b>&</b>" not in html and "hidden until chapter 11" in html and ">POV</span>" in html
    assert f'href="/stories/{STORY}/secrets"' in html  # the story's nav links the page
    earlier = served.page(served.author, f"/stories/{STORY}/secrets?as_of=8").text
    assert '<tr data-character="mira">' not in earlier and 'data-secret="harl">' in earlier
    worker = served.page(served.worker, f"/stories/{STORY}/secrets?as_of=9").text
    assert "ZQVAULTX" not in worker and 'data-secret="vault" data-chapter' not in worker
    canon = served.page(served.worker, f"/stories/{STORY}/canon?as_of=9").text
    assert f'href="/stories/{STORY}/secrets?as_of=9"' in canon
    assert served.page(served.elsewhere, f"/stories/{STORY}/secrets").status_code == 404
    bad = served.page(served.worker, f"/stories/{STORY}/secrets?as_of=0")
    assert bad.status_code == 422 and 'data-code="invalid_field"' in bad.text
