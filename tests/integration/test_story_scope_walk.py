"""Story scope holds everywhere (issue 38, deliverable 2), in-process on the real app, on both
stores.

Another story (``OTHER``) is planted with a marker (``MARK``) in everything it has: its id and
title, chapter goals, scene cards, summaries and accepted text, canon entries (confirmed and
pending), drafts, notes ingested into its ``story:<id>`` collection with their wiki pages and
topics, its command ids, a packet and a key named for it. Keys limited to the demo story, one of
each scope, then walk everything a network door offers, enumerated from the running app (never
listed by hand, so a new route, page, tool or resource is walked or fails the walk naming what it
could not fill):

- every operation of ``app.openapi()["paths"]``;
- every page of the viewer (``infrastructure.web.pages.router``);
- every MCP tool, resource template and resource (``tools/list``, ``resources/templates/list``,
  ``resources/list``, ``prompts/list`` over ``/mcp``).

Each is asked twice: about the other story and about one never started (``GHOST``, ids of the
same length). The two answers must be the same, status and body, once the ids asked are
swapped: a story the key may not see answers exactly as one that does not exist. Asked again
with the key's own story and another story's sub-ids (an entry key, a draft, a proposal, a
packet, an event position) against ids that exist nowhere: the same again. And no answer holds
the marker anywhere but where it echoes what was asked.

Answers that name no story (lists, lint, status, the overview page, ``list_stories``) are taken
before and after the other story is written: apart from the global log position and the read
models' lag (the documented position decision: README, "Keys and scopes"), they must not
change.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.routing import APIRoute
from sqlalchemy import insert

from canon_ledger.infrastructure.web import pages, session
from canon_ledger.projections.runner import quarantine
from tests.integration.test_http_api import STORY, Api, api, shared_api  # noqa: F401 - fixtures

MARK = "qzv8"  # in everything the other story has; in no answer to a key limited to STORY
OTHER = f"{MARK}-rival"
GHOST = "never-told"  # a story never started, as long as OTHER
assert len(GHOST) == len(OTHER)
SEARCH_WORD = "bellfounder"  # in the other story's chapter text and notes, beside the marker; not a marker itself
SCOPES = ("worker", "author", "admin")
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
# What a key limited to stories may see change although its stories did not: the global log
# position (and what is measured in it: read models' positions and lag), by decision.
GLOBAL = {"position", "end", "next_after", "behind", "behind_capped", "behind_seconds", "backlog_texts", "faults"}


def _cmd(n: int) -> str:
    return f"{MARK}-cmd-{n:02d}"


def _other_story_commands() -> list[dict[str, Any]]:
    s = OTHER
    text = (f"The {SEARCH_WORD} of {MARK}port cast the {MARK}chaptertext bell at night. "
            f"Nobody in {MARK}port knew the {SEARCH_WORD}'s name.")
    return [
        {"type": "start_story", "command_id": _cmd(1), "story_id": s, "title": f"The {MARK}title",
         "style_guardrails": [f"{MARK}guardrail"], "output_contract": f"{MARK}contract"},
        {"type": "plan_chapter", "command_id": _cmd(2), "story_id": s, "chapter": 1, "volume": 1,
         "goals": [f"{MARK}goal one"]},
        {"type": "plan_chapter", "command_id": _cmd(3), "story_id": s, "chapter": 2, "volume": 1,
         "goals": [f"{MARK}goal two"]},
        {"type": "propose_canon", "command_id": _cmd(4), "story_id": s, "proposal_id": f"{MARK}-prop",
         "kind": "character", "key": f"{MARK}-hero", "name": f"{MARK}name", "aliases": [f"{MARK}alias"],
         "text": f"{MARK}canontext: the {SEARCH_WORD} of the harbour.", "fields": {"motive": f"{MARK}field"},
         "valid_from": 1},
        {"type": "confirm_canon", "command_id": _cmd(5), "story_id": s, "proposal_id": f"{MARK}-prop"},
        {"type": "propose_canon", "command_id": _cmd(6), "story_id": s, "proposal_id": f"{MARK}-pending",
         "kind": "thread", "key": f"{MARK}-thread", "name": f"{MARK}threadname", "aliases": [],
         "text": f"{MARK}pendingtext", "fields": {"state": "open"}, "valid_from": 1},
        {"type": "add_scene_card", "command_id": _cmd(7), "story_id": s, "chapter": 1, "scene_id": f"{MARK}-1a",
         "summary": f"{MARK}scene", "characters": [f"{MARK}-hero"], "locations": [], "threads": [],
         "callbacks": [], "items": []},
        {"type": "submit_draft", "command_id": _cmd(8), "story_id": s, "chapter": 1, "draft_id": f"{MARK}-draft",
         "text": text},
        {"type": "accept_draft", "command_id": _cmd(9), "story_id": s, "draft_id": f"{MARK}-draft"},
        {"type": "submit_draft", "command_id": _cmd(10), "story_id": s, "chapter": 2,
         "draft_id": f"{MARK}-draft2", "text": f"{MARK}drafttext under review"},
        {"type": "record_chapter_summary", "command_id": _cmd(11), "story_id": s, "chapter": 1,
         "text": f"{MARK}summary"},
        {"type": "record_volume_summary", "command_id": _cmd(12), "story_id": s, "volume": 1,
         "text": f"{MARK}volume"},
    ]


def _note(version: str) -> dict[str, Any]:
    return {"document_id": f"{MARK}-notes.md", "title": f"{MARK} notes",
            "text": f"# {MARK} Bells\n\nThe {SEARCH_WORD} keeps {MARK}notes {version}.\n\n"
                    f"## {MARK} Harbour\n\nThe harbour of {MARK}port at [[{MARK} Bells]] {version}."}


@dataclass(frozen=True)
class Ids:
    """What one side of a pair asks about: a story, and ids of things (of the other story, or
    of nothing at all)."""

    story: str
    key: str  # a canon entry's key
    draft: str
    scene: str  # a scene card's id
    proposal: str
    packet: str
    position: int  # a log position
    name: str  # a key's name
    tag: str  # unique per request: command ids, document ids, key names made by the walk

    @property
    def collection(self) -> str:
        return f"story:{self.story}"


@dataclass
class World:
    api: Api
    tokens: dict[str, str]  # scope -> a key limited to STORY
    sessions: dict[str, str]  # scope -> a viewer session of that key
    other: Ids  # the other story's ids
    ghost: Ids  # ids that exist nowhere, as long as the other's
    own_pair: tuple[Ids, Ids]  # STORY, with the other's sub-ids / with none
    before: dict[str, Any]  # answers naming no story, before the other story was written
    failures: list[str] = field(default_factory=list)


# -- answers, compared -----------------------------------------------------------------------------

UNSHOWN_HEADERS = ("date", "set-cookie", "content-length")
# The command id ``POST /v1/collections/{c}/documents`` makes of a document: a hash of what was sent
INGEST_ID = re.compile(r'"command_id": "ingest-[0-9a-f]{32}"')


def _text_of(response: Any) -> str:
    headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items() if k.lower() not in UNSHOWN_HEADERS)
    body = INGEST_ID.sub('"command_id": "ingest-<hash of the request>"', response.text)
    return f"{response.status_code}\n{headers}\n\n{body}"


def _swap(text: str, a: Ids, b: Ids) -> str:
    """``text`` as it would read had ``b`` been asked instead of ``a``."""
    for x, y in ((a.tag, b.tag), (a.story, b.story), (a.key, b.key), (a.draft, b.draft), (a.scene, b.scene),
                 (a.proposal, b.proposal), (a.packet, b.packet), (a.name, b.name)):
        if x != y:
            text = text.replace(x, y).replace(quote(x, safe=""), quote(y, safe=""))
    if a.position != b.position:
        text = re.sub(rf"(?<![0-9]){a.position}(?![0-9])", str(b.position), text)
    return text


def _echoes_removed(text: str, asked: Ids) -> str:
    for value in (asked.tag, asked.story, asked.key, asked.draft, asked.scene, asked.proposal, asked.name):
        text = text.replace(value, "").replace(quote(value, safe=""), "")
    return text


def _check(world: World, what: str, answers: dict[str, tuple[Ids, str]], pair: tuple[str, str] | None) -> None:
    """No answer holds the marker but as an echo of what was asked; with ``pair``, the two
    answers are one and the same once the ids asked are swapped."""
    for side, (asked, text) in answers.items():
        cleaned = _echoes_removed(text, asked)
        if MARK in cleaned:
            at = cleaned.index(MARK)
            world.failures.append(f"{what} [{side}]: the marker is in the answer: ...{cleaned[max(0, at - 160):at + 80]!r}")
        if re.search(r"(?m)^50[0-9]\n", text) or '"status": 500' in text or '"status":500' in text:
            world.failures.append(f"{what} [{side}]: a server error: {text[:300]!r}")
    if pair is not None:
        (a_ids, a_text), (b_ids, b_text) = answers[pair[0]], answers[pair[1]]
        if _swap(a_text, a_ids, b_ids) != b_text:
            world.failures.append(f"{what}: {pair[0]} and {pair[1]} answer differently:\n  {pair[0]}: "
                                  f"{_swap(a_text, a_ids, b_ids)[:700]!r}\n  {pair[1]}: {b_text[:700]!r}")


def _difference(a: str, b: str) -> str:
    """Where ``a`` and ``b`` part, with some context."""
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"  before ...{a[max(0, at - 200):at + 300]}\n  after  ...{b[max(0, at - 200):at + 300]}"


def _masked(value: Any) -> Any:
    """``value`` with what the position decision lets change (the global log position and the
    read models' lag) zeroed."""
    if isinstance(value, dict):
        return {k: (0 if k in GLOBAL and isinstance(v, (int, float, bool)) else _masked(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _masked_page(html: str) -> str:
    html = re.sub(r'<table class="grid" id="models">.*?</table>', "", html, flags=re.S)
    html = re.sub(r"Log end: position [0-9]+", "", html)
    return re.sub(r'name="csrf" value="[0-9a-f]+"', "", html)


# -- the fixture: the other story, planted -------------------------------------------------------

def _pid_like(pid: str) -> str:
    return pid[:4] + "0" * (len(pid) - 4)


def _none_like(value: str) -> str:
    """An id of nothing, as long as ``value``."""
    return ("none-" + "z" * len(value))[:len(value)]


@pytest.fixture
def world(api: Api) -> World:
    """The other story planted on a server of the test's own: for a test that writes (the key's
    own story, quarantine rows) or compares answers from before the planting with now."""
    return _planted(api)


@pytest.fixture(scope="module")
def planted(shared_api: Api) -> World:
    return _planted(shared_api)


@pytest.fixture
def walked(planted: World) -> World:
    """The other story planted once per module and store, for the walks and lint: they only ask
    (what they send that could write is refused: another story's, or ids of nothing; a login
    session of their own is all that a walk leaves). Failures are the test's own."""
    return replace(planted, failures=[])


def _planted(api: Api) -> World:
    tokens = {scope: api.key(scope, STORY, name=f"limited-{scope}") for scope in SCOPES}
    nobodys = api.position()  # a key's event: a position of no story
    sessions = {scope: api.ctx.keys.open_session(token, session.MAX_AGE)[0] for scope, token in tokens.items()}
    before = _unaimed(api, tokens, sessions)

    admin = api.tokens["admin"]
    planted = api.call("POST", "/v1/commands", admin, json=_other_story_commands())
    assert planted.status_code == 200, planted.text
    start_position = planted.json()["results"][0]["position"]
    note = api.call("POST", f"/v1/collections/story:{OTHER}/documents", admin, json=_note("v1"))
    assert note.status_code == 200, note.text
    api.settle()
    compiled = api.call("POST", f"/v1/compile?collection=story:{OTHER}", admin)
    assert compiled.status_code == 200 and compiled.json()["compiled"] >= 1, compiled.text
    changed = api.call("POST", f"/v1/collections/story:{OTHER}/documents", admin, json=_note("v2"))
    assert changed.status_code == 200, changed.text  # its wiki page is stale now: lint names its topics
    api.ctx.keys.create("author", [OTHER], f"{MARK}-key")
    api.settle()
    packet = api.call("GET", f"/v1/stories/{OTHER}/packet?role=writer&chapter=2", admin)
    assert packet.status_code == 200, packet.text
    pid = packet.json()["packet_id"]
    lint = api.call("GET", "/v1/lint", admin).json()
    assert any(i["collection_id"] == f"story:{OTHER}" for i in lint["issues"]), lint
    with api.ctx.services.canon.write_engine.begin() as conn:  # a fault of the other story's, quarantined
        conn.execute(insert(quarantine).values(projection="walk_only", position=start_position,
                                               event_type="Story.Started", scope=OTHER, error=f"{MARK}error"))

    other = Ids(OTHER, f"{MARK}-hero", f"{MARK}-draft2", f"{MARK}-1a", f"{MARK}-pending", pid, start_position,
                f"{MARK}-key", "")
    ghost = Ids(GHOST, _none_like(other.key), _none_like(other.draft), _none_like(other.scene),
                _none_like(other.proposal), _pid_like(pid), nobodys, _none_like(other.name), "")
    own_other, own_ghost = replace(other, story=STORY), replace(ghost, story=STORY)
    return World(api, tokens, sessions, other, ghost, (own_other, own_ghost), before)


def _tagged(ids: Ids, side: str) -> Ids:
    return replace(ids, tag=f"walk{side}{uuid.uuid4().hex[:10]}")


# -- the API: every operation of the OpenAPI list --------------------------------------------------

PATH_FILL: dict[str, Callable[[Ids], str]] = {
    "story": lambda i: i.story, "kind": lambda i: "character", "key": lambda i: i.key, "number": lambda i: "1",
    "collection": lambda i: i.collection, "packet_id": lambda i: i.packet, "name": lambda i: i.name,
    "position": lambda i: str(i.position), "draft": lambda i: i.draft, "character": lambda i: i.key,
}
AIMED_QUERY: dict[str, Callable[[Ids], str]] = {  # optional parameters that name a story or its things
    "story": lambda i: i.story, "collection": lambda i: i.collection, "draft": lambda i: i.draft,
    "scene": lambda i: i.scene,
}
# Optional parameters that name nothing of a story's (left at their defaults). A new optional
# parameter must join one of the two, so that one naming a story's thing cannot skip the walk.
PLAIN_QUERY = {"after", "limit", "kind", "status", "top", "feedback", "as_of", "budget", "at", "record", "provider",
               "projection", "atomic", "chapter"}
REQUIRED_QUERY = {"as_of": "1", "role": "qa", "chapter": "1", "q": SEARCH_WORD}
SUB_IDS = {"key", "packet_id", "position", "draft", "scene", "character"}  # what the key's own story is asked about, of the other


def _bodies(method: str, path: str, ids: Ids) -> Any:
    """The body of an operation that takes one, aimed at ``ids``; KeyError for one not known."""
    if (method, path) == ("POST", "/v1/commands"):
        if ids.story == STORY:  # the key's own story, with another story's ids: refused as unknown ids
            return [{"type": "confirm_canon", "command_id": f"{ids.tag}-1", "story_id": ids.story,
                     "proposal_id": ids.proposal},
                    {"type": "accept_draft", "command_id": f"{ids.tag}-2", "story_id": ids.story,
                     "draft_id": ids.draft}]
        return [{"type": "plan_chapter", "command_id": f"{ids.tag}-1", "story_id": ids.story, "chapter": 3,
                 "volume": 1, "goals": ["a goal"]},
                {"type": "confirm_canon", "command_id": f"{ids.tag}-2", "story_id": ids.story,
                 "proposal_id": ids.proposal},
                {"type": "ingest_document", "command_id": f"{ids.tag}-3", "collection_id": ids.collection,
                 "document_id": "walk.md", "title": "Walk", "text": "# Walk\n\nA walk.", "max_chunk_tokens": 256}]
    if (method, path) == ("POST", "/v1/collections/{collection}/documents"):
        return {"document_id": f"{ids.tag}.md", "text": "# Walk\n\nA walk."}
    if (method, path) == ("POST", "/v1/keys"):
        return {"scope": "worker", "stories": [ids.story], "name": ids.tag}
    raise KeyError((method, path))


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    path_params: tuple[str, ...]
    required_query: tuple[str, ...]
    aimed_query: tuple[str, ...]
    body: bool
    endless: bool  # an event stream: asked only where it must refuse

    @property
    def aimed(self) -> bool:
        return bool(self.path_params or self.aimed_query or self.body)

    def own_story_variants(self) -> list[tuple[str, ...]]:
        """How the key's own story is asked about another story's ids: the optional ones one at a
        time (the first refused would hide the next), the path's in each; none if it names none."""
        if (self.method, self.path) == ("POST", "/v1/commands"):
            return [()]  # the body's commands name them
        if "story" not in self.path_params:
            return []
        optional: list[tuple[str, ...]] = [(q,) for q in self.aimed_query if q in SUB_IDS]
        return optional or ([()] if SUB_IDS & set(self.path_params) else [])


def _operations(api: Api, failures: list[str]) -> list[Operation]:
    found = []
    app: Any = api.client.app
    for path, operations in app.openapi()["paths"].items():
        for method, operation in operations.items():
            params = operation.get("parameters", [])
            path_params = tuple(p["name"] for p in params if p["in"] == "path")
            required = tuple(p["name"] for p in params if p["in"] == "query" and p.get("required"))
            aimed = tuple(p["name"] for p in params if p["in"] == "query" and not p.get("required")
                          and p["name"] in AIMED_QUERY)
            unknown = [p for p in path_params if p not in PATH_FILL] + [q for q in required if q not in REQUIRED_QUERY]
            unknown += [p["name"] for p in params if p["in"] not in ("path", "query", "header")]
            unknown += [p["name"] for p in params if p["in"] == "query" and not p.get("required")
                        and p["name"] not in AIMED_QUERY and p["name"] not in PLAIN_QUERY]
            if unknown:
                failures.append(f"{method.upper()} {path}: the walk cannot fill {unknown}: teach it (PATH_FILL, "
                                "REQUIRED_QUERY, AIMED_QUERY or PLAIN_QUERY) what they name")
                continue
            body = "requestBody" in operation
            if body:
                try:
                    _bodies(method.upper(), path, GHOST_IDS)
                except KeyError:
                    failures.append(f"{method.upper()} {path}: the walk has no body for it: teach it (_bodies)")
                    continue
            endless = any("text/event-stream" in r.get("content", {}) for r in operation.get("responses", {}).values())
            found.append(Operation(method.upper(), path, path_params, required, aimed, body, endless))
    return found


GHOST_IDS = Ids(GHOST, "k", "d", "s", "p", "pkt_0", 1, "n", "t")


def _ask_api(world: World, op: Operation, token: str, ids: Ids | None, aimed: tuple[str, ...] | None = None) -> str:
    """``op`` asked about ``ids`` (its optional parameters ``aimed``, default all that name a
    story's thing), or with None about nothing in particular."""
    path = op.path
    query = {q: REQUIRED_QUERY[q] for q in op.required_query}
    if ids is not None:
        for name in op.path_params:
            path = path.replace("{" + name + "}", quote(PATH_FILL[name](ids), safe=":"))
        query |= {q: AIMED_QUERY[q](ids) for q in (op.aimed_query if aimed is None else aimed)}
    kw: dict[str, Any] = {"params": query}
    if op.body:
        kw["json"] = _bodies(op.method, op.path, ids if ids is not None else GHOST_IDS)
    response = world.api.call(op.method, path, token, **kw)
    return _text_of(response)


def test_every_api_route_answers_another_story_as_one_never_started(walked: World) -> None:
    world = walked
    operations = _operations(world.api, world.failures)
    assert len(operations) > 20
    asked = 0
    for scope, token in world.tokens.items():
        for op in operations:
            what = f"{op.method} {op.path} ({scope} key limited to {STORY})"
            if op.aimed:
                a, b = _tagged(world.other, "a"), _tagged(world.ghost, "b")
                _check(world, what, {"other": (a, _ask_api(world, op, token, a)),
                                     "ghost": (b, _ask_api(world, op, token, b))}, ("other", "ghost"))
                asked += 2
                for variant in op.own_story_variants():
                    own_a, own_b = (_tagged(i, s) for i, s in zip(world.own_pair, "ab"))
                    _check(world, f"{what}, own story, {variant or 'its path'}",
                           {"other's ids": (own_a, _ask_api(world, op, token, own_a, variant)),
                            "no ids": (own_b, _ask_api(world, op, token, own_b, variant))}, ("other's ids", "no ids"))
                    asked += 2
            if not op.path_params and not op.body and not op.endless:
                none = replace(world.ghost, story="", tag="")
                _check(world, f"{what}, naming no story", {"alone": (none, _ask_api(world, op, token, None))}, None)
                asked += 1
    assert asked > 100
    assert not world.failures, "\n".join(world.failures)


# -- the viewer: every page ----------------------------------------------------------------------

PAGE_FORMS: dict[tuple[str, str], Callable[[Ids, str, str], dict[str, str]]] = {
    ("POST", "/login"): lambda ids, token, csrf: {"key": token, "next": "/"},
    ("POST", "/logout"): lambda ids, token, csrf: {"csrf": csrf},
    ("POST", "/stories/{story}/review"): lambda ids, token, csrf: {
        "csrf": csrf, "action": "confirm_canon", "id": ids.proposal, "command_id": f"{ids.tag}-r"},
}


def _page_routes(failures: list[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    found = []
    for route in pages.router.routes:
        assert isinstance(route, APIRoute)
        params = tuple(re.findall(r"{([^}:]+)", route.path))
        unknown = [p for p in params if p not in PATH_FILL]
        for method in sorted((route.methods or set()) - {"HEAD"}):
            if unknown:
                failures.append(f"page {method} {route.path}: the walk cannot fill {unknown}: teach it (PATH_FILL)")
            elif method != "GET" and (method, route.path) not in PAGE_FORMS:
                failures.append(f"page {method} {route.path}: the walk has no form for it: teach it (PAGE_FORMS)")
            else:
                found.append((method, route.path, params))
    return found


def _ask_page(world: World, method: str, path: str, params: tuple[str, ...], scope: str, ids: Ids | None) -> str:
    api = world.api
    token = world.tokens[scope]
    # A form's post gets a session of its own (a logout ends it); a page, the key's session.
    sid = api.ctx.keys.open_session(token, session.MAX_AGE)[0] if method != "GET" else world.sessions[scope]
    target = path
    for name in params:
        assert ids is not None
        target = target.replace("{" + name + "}", quote(PATH_FILL[name](ids), safe=":"))
    api.client.cookies.clear()
    api.client.cookies.set(session.COOKIE, sid)
    try:
        kw: dict[str, Any] = {"follow_redirects": False}
        if method != "GET":
            kw["data"] = PAGE_FORMS[(method, path)](ids or GHOST_IDS, token, session.csrf_token(sid))
        response = api.client.request(method, target, **kw)
    finally:
        api.client.cookies.clear()
    return _text_of(response)


def test_every_viewer_page_answers_another_story_as_one_never_started(walked: World) -> None:
    world = walked
    routes = _page_routes(world.failures)
    assert len(routes) >= 10
    for scope in SCOPES:
        for method, path, params in routes:
            what = f"page {method} {path} ({scope} key limited to {STORY})"
            if params:
                a, b = _tagged(world.other, "a"), _tagged(world.ghost, "b")
                _check(world, what, {"other": (a, _ask_page(world, method, path, params, scope, a)),
                                     "ghost": (b, _ask_page(world, method, path, params, scope, b))},
                       ("other", "ghost"))
                if "story" in params and (set(params) & SUB_IDS or method == "POST"):
                    own_a, own_b = (_tagged(i, s) for i, s in zip(world.own_pair, "ab"))
                    _check(world, f"{what}, own story",
                           {"other's ids": (own_a, _ask_page(world, method, path, params, scope, own_a)),
                            "no ids": (own_b, _ask_page(world, method, path, params, scope, own_b))},
                           ("other's ids", "no ids"))
            else:
                none = replace(world.ghost, story="", tag="")
                _check(world, what, {"alone": (none, _ask_page(world, method, path, params, scope, None))}, None)
    assert not world.failures, "\n".join(world.failures)


# -- MCP: every tool, resource template, resource and prompt ---------------------------------------

MCP_ARGS: dict[str, Callable[[Ids], Any]] = {
    "story": lambda i: i.story, "collection": lambda i: i.collection, "kind": lambda i: "character",
    "key": lambda i: i.key, "packet_id": lambda i: i.packet, "draft": lambda i: i.draft, "scene": lambda i: i.scene,
    "as_of": lambda i: 1, "chapter": lambda i: 1, "role": lambda i: "qa", "query": lambda i: SEARCH_WORD,
    "name": lambda i: "Walk", "text": lambda i: f"walk {i.tag}", "valid_from": lambda i: 1,
    "character": lambda i: i.key,
}
MCP_AIMED = {"story", "collection", "key", "packet_id", "draft", "scene", "character"}  # arguments that name a story or its things
MCP_PLAIN = {"as_of", "budget", "after", "top", "aliases", "fields", "kind"}  # optional ones that name none


def _rpc(world: World, scope: str, method: str, params: dict[str, Any]) -> Any:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {world.tokens[scope]}"}
    return world.api.client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                                 headers=headers)


def _listed(world: World, scope: str, method: str, name: str) -> list[dict[str, Any]]:
    answer = _rpc(world, scope, method, {})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["result"][name])


def _expand(template: str, ids: Ids, failures: list[str]) -> str | None:
    """An RFC 6570 URI template of the server's, its variables filled (optional query ones left out)."""
    uri = re.sub(r"{\?[^}]*}", "", template)
    unknown = [v for v in re.findall(r"{([^}]+)}", uri) if v not in MCP_ARGS]
    if unknown:
        failures.append(f"MCP resource template {template}: the walk cannot fill {unknown}: teach it (MCP_ARGS)")
        return None
    return re.sub(r"{([^}]+)}", lambda m: quote(str(MCP_ARGS[m.group(1)](ids)), safe=":"), uri)


def test_every_mcp_tool_and_resource_answers_another_story_as_one_never_started(walked: World) -> None:
    world = walked
    tools = _listed(world, "admin", "tools/list", "tools")
    templates = _listed(world, "admin", "resources/templates/list", "resourceTemplates")
    assert len(tools) >= 8 and len(templates) >= 2
    for prompt in _listed(world, "admin", "prompts/list", "prompts"):
        world.failures.append(f"MCP prompt {prompt['name']}: not walked yet: teach the walk its arguments")
    for scope in SCOPES:
        for resource in _listed(world, scope, "resources/list", "resources"):
            answer = _rpc(world, scope, "resources/read", {"uri": resource["uri"]})
            _check(world, f"MCP resource {resource['uri']} ({scope})",
                   {"alone": (replace(world.ghost, story="", tag=""), _text_of(answer))}, None)
        for tool in tools:
            schema = tool["inputSchema"]
            props, required = schema.get("properties", {}), set(schema.get("required", []))
            unknown = sorted((required - set(MCP_ARGS)) | (set(props) - required - MCP_AIMED - MCP_PLAIN))
            if unknown:
                world.failures.append(f"MCP tool {tool['name']}: the walk cannot fill {unknown}: teach it (MCP_ARGS, "
                                      "MCP_AIMED or MCP_PLAIN)")
                continue
            names = required | (set(props) & MCP_AIMED)
            what = f"MCP tool {tool['name']} ({scope} key limited to {STORY})"

            def call(ids: Ids, names: set[str] = names, name: str = tool["name"]) -> str:
                arguments = {n: MCP_ARGS[n](ids) for n in names}
                return _text_of(_rpc(world, scope, "tools/call", {"name": name, "arguments": arguments}))

            if not names & MCP_AIMED:
                _check(world, what, {"alone": (replace(world.ghost, story="", tag=""), call(world.ghost))}, None)
                continue
            a, b = _tagged(world.other, "a"), _tagged(world.ghost, "b")
            _check(world, what, {"other": (a, call(a)), "ghost": (b, call(b))}, ("other", "ghost"))
            read_only = tool.get("annotations", {}).get("readOnlyHint", False)
            subs = names & (MCP_AIMED - {"story", "collection"})
            if "story" not in names or not subs or not read_only:
                continue
            optional = sorted(subs - required)  # one at a time: the first refused would hide the next
            for variant in [required | {n} for n in optional] or [names]:
                own_a, own_b = (_tagged(i, s) for i, s in zip(world.own_pair, "ab"))
                _check(world, f"{what}, own story, {sorted(variant)}",
                       {"other's ids": (own_a, call(own_a, variant)), "no ids": (own_b, call(own_b, variant))},
                       ("other's ids", "no ids"))
        for template in templates:
            what = f"MCP resource {template['uriTemplate']} ({scope} key limited to {STORY})"
            answers = {}
            for side, ids in (("other", _tagged(world.other, "a")), ("ghost", _tagged(world.ghost, "b"))):
                uri = _expand(template["uriTemplate"], ids, world.failures)
                if uri is None:
                    break
                answers[side] = (ids, _text_of(_rpc(world, scope, "resources/read", {"uri": uri})))
            else:
                _check(world, what, answers, ("other", "ghost"))
                variables = set(re.findall(r"{([^}?]+)}", template["uriTemplate"]))
                if not variables & (MCP_AIMED - {"story", "collection"}):
                    continue  # nothing of another story's to ask the key's own story about
                own = {}
                for side, ids in zip(("other's ids", "no ids"), world.own_pair):
                    uri = _expand(template["uriTemplate"], ids, world.failures)
                    assert uri is not None
                    own[side] = (ids, _text_of(_rpc(world, scope, "resources/read", {"uri": uri})))
                _check(world, f"{what}, own story", own, ("other's ids", "no ids"))
    assert not world.failures, "\n".join(world.failures)


# -- answers naming no story: the same before and after another story is written ------------------

def _unaimed(api: Api, tokens: dict[str, str], sessions: dict[str, str]) -> dict[str, Any]:
    """Every GET of the API that names no story (and lint, the log, lists, status), the
    overview page and ``list_stories``, for each limited key; masked by the position decision."""
    got: dict[str, Any] = {}
    app: Any = api.client.app
    for path, operations in app.openapi()["paths"].items():
        operation = operations.get("get")
        if operation is None or "{" in path or any(p.get("required") for p in operation.get("parameters", [])):
            continue
        if any("text/event-stream" in r.get("content", {}) for r in operation.get("responses", {}).values()):
            continue  # endless; its entries are /v1/events' (log_item), walked here
        for scope, token in tokens.items():
            answer = api.call("GET", path, token, params={"limit": "1000"} if path == "/v1/events" else {})
            body: Any = answer.text
            if answer.headers.get("content-type", "").startswith(("application/json", "application/problem+json")):
                body = _masked(answer.json())
            elif path == "/metrics" and answer.status_code == 200:
                body = "a scrape"  # (asserted below: only keys not limited to stories may scrape)
            got[f"GET {path} ({scope})"] = (answer.status_code, body)
    for scope, token in tokens.items():  # a shared collection: every key searches it
        found = api.call("GET", "/v1/collections/guild/search", token, params={"q": SEARCH_WORD})
        result = _masked(found.json())
        if not api.ctx.services.config.is_postgres:
            # SQLite's FTS5 bm25 (and the feedback stage's document frequencies, taken as it takes
            # them) count every collection of the store: scores and stage details may move as any
            # collection grows (README, "Keys, scopes and stories"); the hits may not.
            result = [{k: v for k, v in hit.items() if k != "score"} for hit in result["hits"]]
        got[f"GET /v1/collections/guild/search ({scope})"] = (found.status_code, result)
    for scope, sid in sessions.items():
        api.client.cookies.clear()
        api.client.cookies.set(session.COOKIE, sid)
        page = api.client.get("/", follow_redirects=False)
        api.client.cookies.clear()
        got[f"page / ({scope})"] = (page.status_code, _masked_page(page.text))
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {tokens[scope]}"}
        listed = api.client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                                "params": {"name": "list_stories", "arguments": {}}})
        got[f"MCP list_stories ({scope})"] = (listed.status_code, _masked(listed.json()))
    return got


def test_what_names_no_story_does_not_change_when_another_story_is_written(world: World) -> None:
    before = world.before
    after = _unaimed(world.api, world.tokens, world.sessions)
    assert before.keys() == after.keys()
    changed = [f"{what}:\n{_difference(repr(before[what]), repr(after[what]))}"
               for what in before if before[what] != after[what]]
    assert not changed, "\n".join(changed)
    for scope in SCOPES:  # store-wide figures: only for keys not limited to stories
        for path in ("/metrics", "/v1/quota", "/v1/rebuild"):
            status, _ = after[f"GET {path} ({scope})"]
            assert status == 403, (path, scope, status)
    assert world.api.call("GET", "/metrics", world.api.tokens["admin"]).status_code == 200
    # /readyz counts a key's own stories' quarantined events (by story, or by its collection), and only them
    with world.api.ctx.services.canon.write_engine.begin() as conn:
        conn.execute(insert(quarantine).values(projection="walk_only", position=1, event_type="Story.Started",
                                               scope=f"story:{STORY}", error="the key's own"))
    assert world.api.call("GET", "/readyz", world.tokens["worker"]).json()["quarantined"] == 1
    assert world.api.call("GET", "/readyz", world.api.tokens["worker"]).json()["quarantined"] == 2


# -- lint: what the key may see, counted --------------------------------------------------------------

def test_lint_counts_only_the_collections_a_key_may_see(walked: World) -> None:
    world = walked
    api = world.api
    admin = api.tokens["admin"]
    mine = api.call("GET", "/v1/lint", world.tokens["author"])
    assert mine.status_code == 200, mine.text
    whole = api.call("GET", "/v1/lint", admin).json()
    shown = {i["collection_id"] for i in whole["issues"]}
    assert f"story:{OTHER}" in shown  # the admin's lint has the other story's issues
    parts = [api.call("GET", "/v1/lint", admin, params={"collection": c}) for c in ("guild", f"story:{STORY}")]
    parts = [p.json() for p in parts if p.status_code == 200]
    assert mine.json() == {"green": all(p["green"] for p in parts), "pages": sum(p["pages"] for p in parts),
                           "uncompiled_topics": sum(p["uncompiled_topics"] for p in parts),
                           "issues": sorted((i for p in parts for i in p["issues"]),
                                            key=lambda i: (i["collection_id"], i["topic_id"], i["code"]))}
    # A collection named by a key that may not see it, and one that holds nothing: the same 404
    hidden = api.call("GET", "/v1/lint", world.tokens["author"], params={"collection": f"story:{OTHER}"})
    none = api.call("GET", "/v1/lint", world.tokens["author"], params={"collection": f"story:{GHOST}"})
    assert hidden.status_code == none.status_code == 404 and hidden.json()["code"] == "unknown_collection"
    assert hidden.text.replace(OTHER, GHOST) == none.text
    assert api.call("GET", "/v1/lint", admin, params={"collection": f"story:{OTHER}"}).status_code == 200


# -- command ids --------------------------------------------------------------------------------------

def test_another_storys_command_id_is_not_told_to_a_story_key(world: World) -> None:
    """A command of the key's own story that reuses an id another story used answers as with
    an id used nowhere (the receipts change scopes command ids per story)."""
    api = world.api
    token = world.tokens["author"]
    answers: list[Any] = []
    for command_id in (_cmd(6), "fresh-id-06"):
        plan = {"type": "plan_chapter", "command_id": command_id, "story_id": STORY, "chapter": 40 + len(answers),
                "volume": 1, "goals": ["a goal"]}
        answers.append(api.call("POST", "/v1/commands", token, json=plan))
    reused, fresh = answers
    assert fresh.status_code == 200, fresh.text
    assert MARK not in reused.text.replace(_cmd(6), "")
    # command ids: scoped per story by the receipts change
    assert reused.status_code == 200 and reused.json()["results"][0]["status"] == "applied", reused.text


# -- log positions: global for every key (the decision), and read-your-writes holds -------------------

def test_a_story_key_is_shown_the_global_position_and_reads_its_writes(world: World) -> None:
    api = world.api
    author, worker = world.tokens["author"], world.tokens["worker"]
    summary = {"type": "record_chapter_summary", "command_id": "walk-summary-4", "story_id": STORY, "chapter": 4,
               "text": "What the walk wrote: a summary a read after it must show."}
    applied = api.call("POST", "/v1/commands", author, json=summary)
    assert applied.status_code == 200, applied.text
    position = applied.json()["position"]
    assert position == applied.json()["results"][0]["position"] == api.position()  # the global log's
    chapter = api.call("GET", f"/v1/stories/{STORY}/chapters/4", author, params={"after": position})
    assert chapter.status_code == 200 and summary["text"] in chapter.json()["summary_text"], chapter.text
    packet = api.call("GET", f"/v1/stories/{STORY}/packet", worker,
                      params={"role": "writer", "chapter": 5, "after": position, "record": "false"})
    assert packet.status_code == 200, packet.text
    assert summary["text"] in packet.text  # chapter 4's summary, in the packet for chapter 5
    # a packet's position: its story's last event (a place in the global log, moved by its story only)
    assert int(packet.headers["X-Canon-Position"]) == packet.json()["position"] == chapter.json()["summary_source"]
    tool = _rpc(world, "worker", "tools/call", {"name": "get_packet", "arguments": {
        "story": STORY, "role": "writer", "chapter": 5, "after": position}}).json()["result"]
    assert json.loads(tool["content"][0]["text"])["position"] == packet.json()["position"]  # MCP: the same number
    end = api.position()
    for token in (author, api.tokens["author"]):  # limited or not: one log, one end
        assert api.call("GET", "/v1/events", token, params={"limit": 1}).json()["end"] == end
        assert api.call("GET", "/readyz", token).json()["position"] == end
