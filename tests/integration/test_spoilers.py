"""Spoiler-safe by scope (issue 38): a key below author scope reads nothing hidden at the chapter
it reads, nor anything of a later chapter, through any door; an author still reads it, labelled.

A story is planted with two markers: ``CANON`` in a canon version hidden until chapter 12 (its
text, name, aliases, a field, its state; a hidden revision of a visible entry; a hidden thread;
a chain node hidden until 12 in a visible chain) and ``LATER`` in chapter 3 (its goals, a scene
card, its summary, its accepted text), while chapters 1 and 2 hold neither. Then a worker key
walks every route of the app's OpenAPI route list, every GET page of the viewer and every MCP
tool and resource (each listed from the app or the server, never by hand: a route, page, tool
or resource added later is walked too, and one whose parameters cannot be filled fails the test
naming it), reading as of chapter 2 (neither marker may appear), as of chapter 11 (``CANON`` may
not) and with the defaults (the latest planned chapter, 3: ``CANON`` may not). On both stores.

Every test here only reads (a worker key's refused writes change nothing; the packets it asks
for are recorded under ids of their own): the story is planted once per store and module.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from mcp import Client

from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.story import ROLES
from canon_ledger.infrastructure.mcp.server import build_server
from canon_ledger.infrastructure.mcp.tools import AgentTools
from canon_ledger.infrastructure.web.pages import router as pages
from tests.integration.test_http_api import Api, shared_api  # noqa: F401 - shared_api is a fixture

# On one xdist worker (--dist loadgroup): the shared planted story is made once per store.
pytestmark = pytest.mark.xdist_group("test_spoilers")

STORY = "spoiled"
CANON = "ZQCANONSPOILX"  # hidden until chapter 12
LATER = "ZQLATERCHAPTERX"  # chapter 3's goals, scene card, summary and text
NOTES = "ZQSTORYNOTESX"  # a document of the story's collection that is no chapter
REVEAL = 12


def _propose(pid: str, kind: str, key: str, name: str, text: str, fields: dict[str, Any],
             valid_from: int = 1, aliases: list[str] | None = None) -> list[dict[str, Any]]:
    return [{"type": "propose_canon", "command_id": f"sp-{pid}", "story_id": STORY, "proposal_id": pid,
             "kind": kind, "key": key, "name": name, "aliases": aliases or [], "text": text, "fields": fields,
             "valid_from": valid_from},
            {"type": "confirm_canon", "command_id": f"sp-{pid}-ok", "story_id": STORY, "proposal_id": pid}]


def _chapter(n: int, goal: str, card: str, text: str, summary: str, tags: list[str]) -> list[dict[str, Any]]:
    return [{"type": "plan_chapter", "command_id": f"sp-plan-{n}", "story_id": STORY, "chapter": n, "volume": 1,
             "goals": [goal]},
            {"type": "add_scene_card", "command_id": f"sp-card-{n}", "story_id": STORY, "chapter": n,
             "scene_id": f"{n}a", "summary": card, "characters": tags, "locations": [], "threads": [],
             "callbacks": [], "items": []},
            {"type": "submit_draft", "command_id": f"sp-draft-{n}", "story_id": STORY, "chapter": n,
             "draft_id": f"d{n}", "text": text},
            {"type": "accept_draft", "command_id": f"sp-accept-{n}", "story_id": STORY, "draft_id": f"d{n}"},
            {"type": "record_chapter_summary", "command_id": f"sp-summary-{n}", "story_id": STORY, "chapter": n,
             "text": summary}]


def planted() -> list[dict[str, Any]]:
    hidden = {"hidden_until": REVEAL}
    return [
        {"type": "start_story", "command_id": "sp-start", "story_id": STORY, "title": "A story with a twist",
         "style_guardrails": ["Plain prose."], "output_contract": "Markdown prose."},
        *_propose("p-ilsa", "character", "ilsa", "Ilsa Gray", "A lantern keeper of the harbour.", {"age": 30}),
        *_propose("p-mystery", "character", "mystery", f"{CANON} the stranger", f"{CANON}: the stranger is the king.",
                  {**hidden, "motive": f"{CANON} field", "state": CANON, "secret": True}, aliases=[f"{CANON} alias"]),
        *_propose("p-ilsa-2", "character", "ilsa", f"Ilsa {CANON}", f"Ilsa is {CANON}, the king's daughter.",
                  {**hidden, "age": 30}, valid_from=2),
        *_propose("p-thread", "thread", "open-question", f"{CANON} thread", f"{CANON}: who crowned the stranger?",
                  {**hidden, "state": "open"}),
        *_propose("p-chain", "development_chain", "the-chain", "The lantern chain", "How the lanterns lead home.",
                  {"nodes": [{"id": "seed", "kind": "foreshadow", "text": "A lantern is lit at dusk."},
                             {"id": "payoff", "kind": "payoff", "text": f"{CANON} node", "hidden_until": REVEAL}]}),
        *_chapter(1, "Meet Ilsa at the lantern", "Ilsa lights a lantern.", "Ilsa lit the harbour lantern at dusk.",
                  "Ilsa lights the lantern.", ["ilsa"]),
        *_chapter(2, "The stranger arrives by lantern light", "A stranger at the lantern.",
                  "A stranger stood under the lantern and asked for Ilsa.", "The stranger arrives.",
                  ["ilsa", "mystery"]),
        *_chapter(3, f"{LATER} goal", f"{LATER} scene", f"{LATER} lantern lantern lantern: the crown is found.",
                  f"{LATER} summary", ["ilsa", "mystery"]),
        # Ilsa knows the stranger's secret from chapter 2 (issue 43): who knows it is withheld as it is.
        {"type": "record_knowledge", "command_id": "sp-knows", "story_id": STORY, "character": "ilsa",
         "kind": "character", "key": "mystery", "chapter": 2, "how": f"{CANON}: overheard at the lantern"},
        # A draft under review that gives away Ilsa's hidden version (a spoiler finding whose
        # evidence is hidden until chapter 12) and names the lantern chain's hidden payoff.
        {"type": "submit_draft", "command_id": "sp-draft-review", "story_id": STORY, "chapter": 2,
         "draft_id": "d2-review", "text": "Ilsa Gray, the king's daughter, lit the lantern chain at dusk."},
    ]


class Walk:
    """The planted story on the ``api`` app: keys, a viewer login and what fills parameters."""

    def __init__(self, api: Api) -> None:
        self.api = api
        admin = api.tokens["admin"]
        self.start = api.position() + 1
        r = api.call("POST", "/v1/commands", admin, json=planted(), params={"atomic": "true"})
        assert r.status_code == 200, r.text
        self.canon_at = api.position()
        notes = {"document_id": "notes.md", "text": f"# Notes\n\nThe lantern {NOTES} plan."}
        assert api.call("POST", f"/v1/collections/story:{STORY}/documents", admin, json=notes).status_code == 200
        api.settle()
        packet = api.call("GET", f"/v1/stories/{STORY}/packet", admin, params={"role": "writer", "chapter": 2})
        assert packet.status_code == 200, packet.text
        self.packet_id = packet.json()["packet_id"]
        api.settle()
        self.end = api.position()
        self.worker = api.tokens["worker"]
        self.author = api.tokens["author"]

    def login(self, token: str) -> None:
        self.api.client.cookies.clear()
        r = self.api.client.post("/login", data={"key": token, "next": "/"}, follow_redirects=False)
        assert r.status_code == 303, r.text


# What fills a parameter, by name: each value is walked (the product over a route's parameters).
PATH_VALUES: dict[str, list[Any]] = {
    "story": [STORY], "kind": ["character", "thread", "development_chain"],
    "key": ["mystery", "ilsa", "open-question", "the-chain"], "number": [2, 3],
    "collection": [f"story:{STORY}"], "name": ["the-worker"], "role": list(ROLES), "chapter": [2, 3],
    "draft": ["d2-review"], "character": ["ilsa", "mystery"],
}
# A search asks for the markers in lower case (the keyword index folds case): an answer echoes
# its query, and only the planted spelling in a hit is a leak.
QUERY_VALUES: dict[str, Any] = {"q": f"{LATER} {CANON} {NOTES} lantern".lower(), "role": "writer", "story": STORY,
                                "limit": 50, "top": 8}
# How each reading asks for its chapter, and the markers no answer to it may hold.
READINGS = {"as of chapter 2": (2, (CANON, LATER, NOTES)), "as of chapter 11": (11, (CANON, NOTES)),
            "with the defaults": (None, (CANON, NOTES))}
CHAPTER_PARAMS = ("as_of", "chapter")  # a route's (or page's, tool's) way to say the chapter read


def _leaks(text: str, markers: tuple[str, ...]) -> list[str]:
    return [m for m in markers if m in text]


def _operations(api: Api) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, operations in api.client.app.openapi()["paths"].items():
        for method, operation in operations.items():
            yield method.upper(), path, operation


def _requests(walk: Walk, method: str, path: str, operation: dict[str, Any], chapter: int | None
              ) -> list[tuple[str, dict[str, Any]]]:
    """Every request the route is walked with: its path parameters filled from the planted story
    (each value), its required query parameters, and the chapter read where it takes one."""
    params = operation.get("parameters", [])
    names = [p["name"] for p in params if p["in"] == "path"]
    missing = [n for n in names if n not in PATH_VALUES and n != "packet_id"]
    assert not missing, f"{method} {path}: no value to fill path parameter(s) {missing}: add them to PATH_VALUES"
    values = [[walk.packet_id] if n == "packet_id" else PATH_VALUES[n] for n in names]
    out = []
    for combo in itertools.product(*values):
        url = path
        for n, v in zip(names, combo):
            url = url.replace("{" + n + "}", quote(str(v), safe=""))
        query: dict[str, Any] = {}
        for p in params:
            if p["in"] != "query":
                continue
            name, required = p["name"], p.get("required", False)
            if name in CHAPTER_PARAMS and (chapter is not None or required):
                query[name] = chapter if chapter is not None else 3  # the defaults: the latest planned
            elif required:
                assert name in QUERY_VALUES or name in PATH_VALUES, \
                    f"{method} {path}: no value to fill required query parameter {name!r}: add it to QUERY_VALUES"
                query[name] = QUERY_VALUES[name] if name in QUERY_VALUES else PATH_VALUES[name][0]
        out.append((url, query))
    return out


@pytest.fixture(scope="module")
def planted_walk(shared_api: Api) -> Walk:
    return Walk(shared_api)


@pytest.fixture
def walk(planted_walk: Walk) -> Walk:
    """The planted story, its client with no viewer session (as a fresh server's)."""
    planted_walk.api.client.cookies.clear()
    return planted_walk


def test_every_route_keeps_spoilers_from_a_worker(walk: Walk) -> None:
    api = walk.api
    answered: dict[tuple[str, str], set[int]] = {}
    leaks = []
    for reading, (chapter, markers) in READINGS.items():
        for method, path, operation in _operations(api):
            if path.endswith("/stream"):
                # Endless for a key that may read it; a worker key is refused at once (the
                # stream needs author scope: tests/e2e/test_event_stream.py).
                r = api.call(method, path, walk.worker, params={"story": STORY})
                assert r.status_code == 403, (path, r.status_code)
                answered[(method, path)] = {403}
                continue
            for url, query in _requests(walk, method, path, operation, chapter):
                kw: dict[str, Any] = {"params": query}
                if method in ("POST", "PUT", "PATCH"):
                    kw["json"] = {}
                r = api.call(method, url, walk.worker, **kw)
                assert r.status_code < 500, (method, url, query, r.text[:300])
                answered.setdefault((method, path), set()).add(r.status_code)
                found = _leaks(r.text + json.dumps(dict(r.headers)), markers)
                if found:
                    leaks.append(f"{reading}: {method} {url}?{urlencode(query)} -> {r.status_code} holds {found}")
    assert not leaks, "\n".join(leaks)
    # Each route was really read (200), or refused for its scope (403): never only a 404 or 422
    # of a parameter this walk filled wrongly.
    unread = {route: codes for route, codes in answered.items() if not codes & {200, 202, 403}}
    assert not unread, f"routes the walk could not fill: {unread}"
    assert {200} <= answered[("GET", "/v1/stories/{story}/canon")]


def _page_paths(walk: Walk, chapter: int | None) -> list[tuple[str, str]]:
    """Every GET page of the viewer (its router, listed), filled from the planted story."""
    out = []
    for route in pages.routes:
        if "GET" not in getattr(route, "methods", set()):
            continue
        path: str = route.path  # type: ignore[attr-defined]
        names = re.findall(r"{(\w+)}", path)
        values: list[list[Any]] = []
        for n in names:
            if n == "packet_id":
                values.append([walk.packet_id])
            elif n == "position":
                values.append(list(range(walk.start, walk.end + 1)))  # every event of the planted story
            else:
                assert n in PATH_VALUES, f"page {path}: no value to fill {n!r}: add it to PATH_VALUES"
                values.append(PATH_VALUES[n])
        for combo in itertools.product(*values):
            url = path
            for n, v in zip(names, combo):
                url = url.replace("{" + n + "}", quote(str(v), safe=""))
            query = {} if chapter is None else {"as_of": chapter, "chapter": chapter}
            if path.endswith("/compare"):
                query |= {"from": walk.canon_at, "to": walk.end}
            out.append((path, f"{url}?{urlencode(query)}" if query else url))
    return out


def test_every_viewer_page_keeps_spoilers_from_a_worker(walk: Walk) -> None:
    api = walk.api
    walk.login(walk.worker)
    answered: dict[str, set[int]] = {}
    leaks = []
    for reading, (chapter, markers) in READINGS.items():
        for route, url in _page_paths(walk, chapter):
            r = api.client.get(url, follow_redirects=False)
            assert r.status_code < 500, (url, r.text[:300])
            answered.setdefault(route, set()).add(r.status_code)
            if found := _leaks(r.text, markers):
                leaks.append(f"{reading}: GET {url} -> {r.status_code} holds {found}")
    assert not leaks, "\n".join(leaks)
    unread = {route: codes for route, codes in answered.items() if not codes & {200, 403}}
    assert not unread, f"pages the walk could not fill: {unread}"
    page = api.client.get(f"/stories/{STORY}/canon?as_of=2")
    assert 'data-key="mystery" data-hidden="yes"' in page.text and "hidden until chapter 12" in page.text
    page = api.client.get(f"/stories/{STORY}/canon/character/ilsa")
    assert 'data-hidden="yes"' in page.text and "hidden until chapter 12" in page.text
    assert "Ilsa Gray" in page.text  # the version shown with its text
    walk.login(walk.author)  # an author reads the hidden text, labelled
    page = api.client.get(f"/stories/{STORY}/canon?as_of=2")
    assert 'data-key="mystery" data-hidden="yes"' in page.text and "hidden until chapter 12" in page.text
    assert f"{CANON}: the stranger is the king." in page.text
    page = api.client.get(f"/stories/{STORY}/canon/character/ilsa")
    assert 'data-hidden="yes"' in page.text and f"Ilsa is {CANON}" in page.text


def _tool_arguments(tool: Any, chapter: int | None, walk: Walk) -> list[dict[str, Any]]:
    props: dict[str, Any] = tool.input_schema.get("properties", {})
    required = set(tool.input_schema.get("required", []))
    fixed: dict[str, Any] = {"query": QUERY_VALUES["q"], "packet_id": walk.packet_id, "name": "walk",
                             "text": "walk", "valid_from": 1}
    names, values = [], []
    for name in props:
        if name in CHAPTER_PARAMS:
            if chapter is not None or name in required:
                names.append(name)
                values.append([chapter if chapter is not None else 3])
        elif name in PATH_VALUES and name in required:
            names.append(name)
            values.append(PATH_VALUES[name])
        elif name in fixed and name in required:
            names.append(name)
            values.append([fixed[name]])
        else:
            assert name not in required, f"MCP tool {tool.name}: no value to fill {name!r}"
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def _template_uris(template: str, chapter: int | None, walk: Walk) -> list[str]:
    """A resource template's URIs, filled (RFC 6570 level 1 and form-style query)."""
    names = re.findall(r"{(\w+)}", template)
    query_names = [n for group in re.findall(r"{\?([\w,]+)}", template) for n in group.split(",")]
    values = []
    for n in names:
        if n in ("chapter",):
            values.append([chapter if chapter is not None else 3])
        else:
            assert n in PATH_VALUES, f"MCP resource {template}: no value to fill {n!r}"
            values.append(PATH_VALUES[n])
    base = re.sub(r"{\?[\w,]+}", "", template)
    out = []
    for combo in itertools.product(*values):
        uri = base
        for n, v in zip(names, combo):
            uri = uri.replace("{" + n + "}", quote(str(v), safe=""))
        query = {n: chapter for n in query_names if n in CHAPTER_PARAMS and chapter is not None}
        out.append(f"{uri}?{urlencode(query)}" if query else uri)
    return out


def _mcp(walk: Walk, principal: Principal, body: Any) -> Any:
    tools = AgentTools(walk.api.ctx)
    server = build_server(lambda: tools, local=principal)

    async def go() -> Any:
        async with Client(server) as session:
            return await body(session)

    return asyncio.run(go())


def test_every_mcp_tool_and_resource_keeps_spoilers_from_a_worker(walk: Walk) -> None:
    async def agent(session: Client) -> tuple[list[str], dict[str, int], list[str]]:
        tools = (await session.list_tools()).tools
        templates = (await session.list_resource_templates()).resource_templates
        resources = (await session.list_resources()).resources
        assert {"list_canon", "canon_entry", "open_threads", "search"} <= {t.name for t in tools}
        assert any("/entry/" in t.uri_template for t in templates)
        leaks, answered, refused = [], {}, []
        for reading, (chapter, markers) in READINGS.items():
            for tool in tools:
                for arguments in _tool_arguments(tool, chapter, walk):
                    result = await session.call_tool(tool.name, arguments)
                    text = "".join(getattr(c, "text", "") for c in result.content)
                    ok = not result.is_error
                    answered[tool.name] = answered.get(tool.name, 0) + ok
                    if result.is_error and json.loads(text)["error"]["status"] == 403:
                        refused.append(tool.name)
                    if found := _leaks(text + json.dumps(result.structured_content), markers):
                        leaks.append(f"{reading}: tool {tool.name}({arguments}) holds {found}")
            uris = [u for t in templates for u in _template_uris(t.uri_template, chapter, walk)]
            for uri in uris + [str(r.uri) for r in resources]:
                try:
                    read = await session.read_resource(uri)
                except Exception as e:  # noqa: BLE001 - a refusal (unknown entry as of the chapter)
                    text = str(getattr(e, "error", e))
                else:
                    text = "".join(getattr(c, "text", "") for c in read.contents)
                    answered[uri.split("?")[0]] = 1
                if found := _leaks(text, markers):
                    leaks.append(f"{reading}: resource {uri} holds {found}")
        return leaks, answered, refused

    leaks, answered, refused = _mcp(walk, Principal("walker", "worker"), agent)
    assert not leaks, "\n".join(leaks)
    unread = [name for name, n in answered.items() if not n and name not in refused]
    assert not unread, f"MCP tools the walk could not fill: {unread}"


# -- what each key does see --------------------------------------------------------------------


def _row(entries: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return next(e for e in entries if e["key"] == key)


def test_a_worker_sees_hidden_canon_listed_as_a_packet_lists_it_and_an_author_sees_it_labelled(walk: Walk) -> None:
    api = walk.api
    path = f"/v1/stories/{STORY}/canon"
    worker = api.call("GET", path, walk.worker, params={"as_of": 2}).json()["entries"]
    author = api.call("GET", path, walk.author, params={"as_of": 2}).json()["entries"]
    mystery = _row(worker, "mystery")
    assert mystery == {"kind": "character", "key": "mystery", "step": mystery["step"], "valid_from": 1, "name": "",
                       "state": None, "hidden_until": REVEAL, "text": "", "source": mystery["source"],
                       "aliases": [], "inherited_from": None, "hidden": True,
                       "reason": f"hidden until chapter {REVEAL}"}
    assert _row(worker, "the-chain")["hidden"] is False and "lantern" in _row(worker, "the-chain")["text"]
    shown = _row(author, "mystery")
    assert shown["hidden"] is True and shown["reason"] == f"hidden until chapter {REVEAL}"
    assert CANON in shown["text"] and CANON in shown["name"] and shown["aliases"] == [f"{CANON} alias"]
    # From chapter 12 a worker reads it too, as a packet does.
    revealed = _row(api.call("GET", path, walk.worker, params={"as_of": REVEAL}).json()["entries"], "mystery")
    assert revealed["hidden"] is False and CANON in revealed["text"]

    # The entry's history: the hidden revision listed, the entry named by the version shown.
    history = api.call("GET", f"/v1/stories/{STORY}/canon/character/ilsa", walk.worker).json()
    assert history["name"] == "Ilsa Gray" and [v["hidden"] for v in history["versions"]] == [False, True]
    assert history["versions"][1]["text"] == "" and history["versions"][1]["reason"] == "hidden until chapter 12"
    then = api.call("GET", f"/v1/stories/{STORY}/canon/character/ilsa", walk.worker, params={"as_of": 1}).json()
    assert then["as_of"] == 1 and len(then["versions"]) == 1 and then["in_force"]["name"] == "Ilsa Gray"
    full = api.call("GET", f"/v1/stories/{STORY}/canon/character/ilsa", walk.author).json()
    assert full["versions"][1]["hidden"] is True and CANON in full["versions"][1]["text"] and CANON in full["name"]

    # MCP answers as the API does, for each key.
    async def ask(session: Client) -> Any:
        return (await session.call_tool("list_canon", {"story": STORY, "as_of": 2})).structured_content

    assert _mcp(walk, Principal("w", "worker"), ask) == api.call("GET", path, walk.worker, params={"as_of": 2}).json()
    assert _mcp(walk, Principal("a", "author"), ask) == api.call("GET", path, walk.author, params={"as_of": 2}).json()


def test_a_later_chapter_is_listed_without_what_reveals_it(walk: Walk) -> None:
    api = walk.api
    later = api.call("GET", f"/v1/stories/{STORY}/chapters/3", walk.worker, params={"as_of": 2}).json()
    assert later["hidden"] is True and later["reason"] == "chapter 3 comes after chapter 2, the chapter asked"
    assert (later["chapter"], later["volume"], later["text_accepted"]) == (3, 1, True)
    assert later["goals_text"] == later["summary_text"] == "" and later["scenes"] == []
    assert later["goals_source"] is later["summary_source"] is later["text_tokens"] is later["text_source"] is None
    assert LATER not in json.dumps(later)
    current = api.call("GET", f"/v1/stories/{STORY}/chapters/2", walk.worker, params={"as_of": 2}).json()
    assert current["hidden"] is False and "stranger" in current["goals_text"] and current["scenes"]
    # With no as_of, the chapter read is the latest planned (3): chapter 3 is shown.
    latest = api.call("GET", f"/v1/stories/{STORY}/chapters/3", walk.worker).json()
    assert latest["hidden"] is False and LATER in latest["goals_text"]
    labelled = api.call("GET", f"/v1/stories/{STORY}/chapters/3", walk.author, params={"as_of": 2}).json()
    assert labelled["hidden"] is True and LATER in labelled["goals_text"]


def test_search_of_a_story_stops_at_the_chapter_read_and_still_fills_the_top(walk: Walk) -> None:
    api = walk.api
    path = f"/v1/collections/story:{STORY}/search"

    def ids(token: str, **params: Any) -> list[str]:
        r = api.call("GET", path, token, params={"q": "lantern", **params})
        assert r.status_code == 200, r.text
        return [h["id"] for h in r.json()["hits"]]

    everything = ids(walk.author, top=8)
    assert any("chapter-00003" in i for i in everything) and any("notes.md" in i for i in everything)
    early = ids(walk.worker, top=2, as_of=2)
    assert len(early) == 2 and all(re.search(r"chapter-0000[12]#", i) for i in early)  # filtered before the top 2
    assert all("chapter-00003" not in i for i in ids(walk.author, as_of=2))  # an explicit as_of holds for authors
    default = ids(walk.worker)  # the latest planned chapter: 3; no document that is no chapter
    assert any("chapter-00003" in i for i in default) and not any("notes.md" in i for i in default)

    async def ask(session: Client) -> Any:
        return (await session.call_tool("search", {"collection": f"story:{STORY}", "query": "lantern", "top": 2,
                                                   "as_of": 2})).structured_content

    assert [h["id"] for h in _mcp(walk, Principal("w", "worker"), ask)["hits"]] == early


def test_a_summarizer_packet_names_no_entry_hidden_at_its_chapter_and_compiler_5_still_replays(walk: Walk) -> None:
    """Compiler 6 on: the role lists leave out a tagged entry hidden at the chapter (compiler 5
    named it: a packet it issued replays so, byte for byte)."""
    from canon_ledger.application.packets import compiler, replay
    from canon_ledger.application.packets.recipes import Request

    packets = walk.api.ctx.services.packets
    request = Request(STORY, "summarizer", 2)
    with packets.reader.snapshot() as snap:
        now = compiler.compile_packet(snap, request, packets.tokens, packets.retriever)
        then = replay.compile_packet(snap, request, packets.tokens, packets.retriever, compiler=5)
    lists = {p.compiler: "".join(i.text for i in p.items if i.kind == "role_lists") for p in (now, then)}
    # Both tagged entries are hidden at 2 (ilsa's version in force then too): no name to list.
    assert now.compiler == 7 and lists[now.compiler] == "" and CANON not in now.to_json()
    assert f"{CANON} the stranger (mystery)" in lists[5] and then.compiler == 5  # as compiler 5 issued it
    revealed = Request(STORY, "summarizer", 3)
    with packets.reader.snapshot() as snap:
        at3 = compiler.compile_packet(snap, revealed, packets.tokens, packets.retriever)
    assert CANON not in at3.to_json()  # still hidden at 3 (until 12)
