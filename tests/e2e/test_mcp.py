"""The MCP server with the SDK's own client: ``canon mcp`` as a stdio subprocess, and ``/mcp``
in a real ``canon serve`` on a loopback port, both on the demo story, on both stores.

Checked: the tools and their schemas; ``get_packet`` gives the API's bytes; ``propose_canon``
twice appends one proposal, which the review queue shows and no packet includes until an
author confirms it through the API; nothing in MCP can confirm; keys and their scopes and
stories bound every tool over HTTP; bad arguments get structured errors and change nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jsonschema
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.cli_runner import canon
from tests.e2e.test_http_server import STORY, Server
from tests.e2e.test_viewer import demo, key, served_demo  # noqa: F401 - demo, served_demo are fixtures

TOOLS = {"list_stories", "get_packet", "search", "canon_entry", "list_canon", "open_threads", "propose_canon",
         "audit_packet", "check_draft", "character_knowledge", "secrets"}
RULE = {"story": STORY, "kind": "world_rule", "key": "tide-bells", "name": "The tide bells",
        "text": "The tide bells of the harbour ring thirteen times at the turn of every spring tide.", "valid_from": 1,
        "aliases": ["tide bells"], "fields": {"source": "an agent"}}
ROOT = Path(__file__).resolve().parents[2]


def stdio(url: str, token: str | None = None) -> Client:
    env = {k: v for k, v in os.environ.items() if k not in ("CANON_DATABASE_URL", "CANON_MCP_KEY")}
    env["CANON_EMBEDDER"] = "hashing"
    if token is not None:
        env["CANON_MCP_KEY"] = token
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "canon_ledger.infrastructure.cli", "--db", url, "mcp"],
                                        env=env, cwd=str(ROOT)))


def http(server: Server, token: str) -> Client:
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(f"{server.base}/mcp", http_client=client))


def run(client: Client, body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        async with client as session:
            return await body(session)

    return asyncio.run(go())


def error(result: Any) -> dict[str, Any]:
    assert result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content["error"]


def api(server: Server, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def in_log(server: Server, token: str) -> int:
    return api(server, token).get("/v1/events", params={"limit": 1}).json()["end"]


def test_over_stdio_an_agent_reads_packets_and_proposes_but_only_an_author_confirms(
        served_demo: tuple[Server, str, str]) -> None:
    server, admin, url = served_demo
    author = key(url, "author")
    with api(server, author) as client:
        expected = client.get(f"/v1/stories/{STORY}/packet", params={"role": "writer", "chapter": 3})
        assert expected.status_code == 200

    async def agent(session: Client) -> dict[str, Any]:
        listed = await session.list_tools()
        got: dict[str, Any] = {"tools": {t.name: t for t in listed.tools}}
        got["packet"] = await session.call_tool("get_packet", {"story": STORY, "role": "writer", "chapter": 3})
        got["review"] = await session.call_tool("get_packet", {"story": STORY, "role": "qa", "chapter": 5,
                                                               "draft": "d5-wip"})
        got["first"] = await session.call_tool("propose_canon", RULE)
        got["again"] = await session.call_tool("propose_canon", RULE)
        got["confirm"] = await session.call_tool("confirm_canon", {"story": STORY, "proposal_id": "x"})
        got["before"] = await session.call_tool("get_packet", {"story": STORY, "role": "writer", "chapter": 3})
        return got

    got = run(stdio(url), agent)
    assert set(got["tools"]) == TOOLS  # nothing that confirms, rejects, retires or decides drafts
    for tool in got["tools"].values():
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.description and len(tool.description) > 40
    assert got["tools"]["get_packet"].input_schema["properties"]["chapter"]["minimum"] == 1
    assert not got["packet"].is_error
    assert got["packet"].content[0].text == expected.text  # the API's bytes
    assert got["packet"].structured_content is None  # the text is the packet: one copy, the API's bytes
    review = json.loads(got["review"].content[0].text)  # the qa packet holds the draft it checks, labelled
    assert [i["key"] for i in review["items"] if i["kind"] == "draft_under_review"] == ["d5-wip"]

    first, again = got["first"].structured_content, got["again"].structured_content
    assert (first["status"], again["status"]) == ("applied", "duplicate")
    assert first["proposal_id"] == again["proposal_id"] and "confirm" in first["how_to_confirm"]
    assert error(got["confirm"])["code"] == "unknown_tool"
    assert RULE["text"] not in got["before"].content[0].text

    with api(server, author) as client:
        pending = client.get(f"/v1/stories/{STORY}/proposals", params={"status": "proposed"}).json()["proposals"]
        assert [p["proposal_id"] for p in pending].count(first["proposal_id"]) == 1
        with httpx.Client(base_url=server.base) as browser:
            assert browser.post("/login", data={"key": author, "next": "/"}).status_code == 303  # a session cookie
            review = browser.get(f"/stories/{STORY}/review")
        assert review.status_code == 200 and RULE["text"] in review.text and first["proposal_id"] in review.text
        events = client.get("/v1/events", params={"story": STORY, "limit": 1000}).json()["events"]
        assert sum(e["type"].endswith("Proposed") for e in events
                   if e["data"].get("proposal_id") == first["proposal_id"]) == 1
        confirmed = client.post("/v1/commands", json={"type": "confirm_canon", "command_id": "person-confirms",
                                                      "story_id": STORY, "proposal_id": first["proposal_id"]})
        assert confirmed.status_code == 200, confirmed.text

    async def after(session: Client) -> Any:
        return await session.call_tool("get_packet", {"story": STORY, "role": "writer", "chapter": 3})

    assert RULE["text"] in run(stdio(url), after).content[0].text


def test_over_stdio_the_other_tools_and_resources_answer_like_the_api(served_demo: tuple[Server, str, str]) -> None:
    server, admin, url = served_demo

    async def agent(session: Client) -> dict[str, Any]:
        got: dict[str, Any] = {}
        got["stories"] = await session.call_tool("list_stories", {})
        got["canon"] = await session.call_tool("list_canon", {"story": STORY, "as_of": 2})
        got["entry"] = await session.call_tool("canon_entry", {"story": STORY, "kind": "character", "key": "ilse"})
        got["entry_then"] = await session.call_tool("canon_entry", {"story": STORY, "kind": "character",
                                                                    "key": "ilse", "as_of": 1})
        got["threads"] = await session.call_tool("open_threads", {"story": STORY, "chapter": 4})
        got["search"] = await session.call_tool("search", {"collection": f"story:{STORY}", "query": "lamp", "top": 3})
        packet = await session.call_tool("get_packet", {"story": STORY, "role": "qa", "chapter": 2})
        got["packet"] = json.loads(packet.content[0].text)
        got["audit"] = await session.call_tool("audit_packet", {"packet_id": got["packet"]["packet_id"]})
        resource = await session.read_resource(f"canon://{STORY}/packet/qa/2")
        got["resource"] = resource.contents[0].text
        entry = await session.read_resource(f"canon://{STORY}/entry/character/ilse?as_of=1")
        got["entry_resource"] = json.loads(entry.contents[0].text)
        try:
            await session.read_resource(f"canon://{STORY}/entry/character/nobody")
        except MCPError as e:
            got["missing"] = e.error
        try:
            await session.read_resource(f"canon://{STORY}/packet/qa/1000000000000000000000000000000")
        except MCPError as e:
            got["huge"] = e.error
        return got

    got = run(stdio(url), agent)
    with api(server, admin) as client:
        assert got["canon"].structured_content == client.get(f"/v1/stories/{STORY}/canon", params={"as_of": 2}).json()
        whole = client.get(f"/v1/stories/{STORY}/canon/character/ilse").json()
        assert got["entry"].structured_content == whole
        search = client.get(f"/v1/collections/story:{STORY}/search", params={"q": "lamp", "top": 3}).json()
        threads = client.get(f"/v1/stories/{STORY}/canon", params={"as_of": 4, "kind": "thread"}).json()["entries"]
    assert [s["story_id"] for s in got["stories"].structured_content["stories"]] == [STORY]
    then = got["entry_then"].structured_content
    assert then["in_force"]["valid_from"] <= 1 and all(v["valid_from"] <= 1 for v in then["versions"])
    assert len(then["versions"]) < len(whole["versions"])  # ilse is revised from chapter 4: no spoiler at 1
    assert got["entry_resource"] == then
    open_keys = [t["key"] for t in got["threads"].structured_content["threads"]]
    assert open_keys == [t["key"] for t in threads if (t["state"] or "").lower() != "resolved"] and open_keys
    hits = got["search"].structured_content["hits"]
    assert hits and [h["id"] for h in hits] == [h["id"] for h in search["hits"]] and all(h["sources"] for h in hits)
    assert got["audit"].structured_content["verdict"] == "ok"
    assert json.loads(got["resource"]) == got["packet"]
    assert got["missing"].data["code"] == "unknown_canon_entry"
    assert (got["huge"].data["code"], got["huge"].data["field"]) == ("invalid_field", "chapter")


def test_over_http_every_call_needs_a_key_and_stays_inside_it(demo: tuple[Server, str, str]) -> None:
    # A fresh store: it counts the entries a packet records, and a packet already issued by
    # another test (the same bytes) is not recorded again.
    server, admin, url = demo
    worker, author = key(url, "worker"), key(url, "author")
    elsewhere = canon("--db", url, "key", "create", "--scope", "author", "--story", "another", "--format", "json")
    other = json.loads(elsewhere.stdout)["token"]

    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers, code in (({}, "unauthenticated"), ({"Authorization": "Bearer nope"}, "invalid_key")):
        refused = httpx.post(f"{server.base}/mcp", json=hello, headers=headers)
        assert refused.status_code == 401 and refused.json()["code"] == code
        assert refused.headers["content-type"].startswith("application/problem+json")

    async def as_worker(session: Client) -> dict[str, Any]:
        return {"packet": await session.call_tool("get_packet", {"story": STORY, "role": "writer", "chapter": 3}),
                "propose": await session.call_tool("propose_canon", RULE),
                # a qa agent checks what a qa packet would hold: a submitted draft, not a decided one
                "check": await session.call_tool("check_draft", {"story": STORY, "draft": "d5-wip"}),
                "decided": await session.call_tool("check_draft", {"story": STORY, "draft": "d2-first"})}

    async def as_other(session: Client) -> dict[str, Any]:
        return {"packet": await session.call_tool("get_packet", {"story": STORY, "role": "writer", "chapter": 3}),
                "stories": await session.call_tool("list_stories", {}),
                "search": await session.call_tool("search", {"collection": f"story:{STORY}", "query": "lamp"}),
                "propose": await session.call_tool("propose_canon", RULE),
                "check": await session.call_tool("check_draft", {"story": STORY, "draft": "d5-wip"})}

    async def as_author(session: Client) -> Any:
        return {"propose": await session.call_tool("propose_canon", {**RULE, "key": "tide-bells-http"}),
                "check": await session.call_tool("check_draft", {"story": STORY, "draft": "d2-first"})}

    end = in_log(server, admin)
    got = run(http(server, worker), as_worker)
    with api(server, worker) as client:
        assert got["packet"].content[0].text == client.get(f"/v1/stories/{STORY}/packet",
                                                            params={"role": "writer", "chapter": 3}).text
    assert (error(got["propose"])["code"], error(got["propose"])["status"]) == ("forbidden", 403)
    with api(server, author) as client:  # the API's report (author scope), less its stages' timings
        checked = client.get(f"/v1/stories/{STORY}/drafts/d5-wip/check").json()
    report = got["check"].structured_content
    assert not got["check"].is_error and json.loads(got["check"].content[0].text) == report
    assert {**report, "stages": None} == {**checked, "stages": None} and report["draft_id"] == "d5-wip"
    assert (error(got["decided"])["code"], error(got["decided"])["status"]) == ("draft_not_under_review", 409)
    limited = run(http(server, other), as_other)
    for name in ("packet", "search", "propose", "check"):
        assert error(limited[name])["status"] == 404, name  # another story is as unknown as one never started
    assert limited["stories"].structured_content["stories"] == []
    assert in_log(server, admin) == end + 1  # only the worker's packet was recorded
    proposed = run(http(server, author), as_author)
    assert proposed["propose"].structured_content["status"] == "applied"
    decided = proposed["check"].structured_content  # an author key checks a decided draft too
    assert (decided["draft_id"], decided["status"]) == ("d2-first", "rejected")


def test_bad_arguments_get_structured_errors_and_change_nothing(served_demo: tuple[Server, str, str]) -> None:
    server, admin, url = served_demo
    author = key(url, "author")
    bad = [("get_packet", {"story": "no-such-story", "role": "writer", "chapter": 1}, "unknown_story", None),
           ("get_packet", {"story": STORY, "role": "poet", "chapter": 1}, "invalid_field", "role"),
           ("get_packet", {"story": STORY, "role": "writer", "chapter": -1}, "invalid_field", "chapter"),
           ("get_packet", {"story": STORY, "role": "writer", "chapter": 10**30}, "invalid_field", "chapter"),
           ("get_packet", {"story": STORY, "role": "writer", "chapter": 1, "after": 10**9}, "position_beyond_log",
            "after"),
           ("get_packet", {"story": STORY, "role": "writer", "chapter": 5, "draft": "d5-wip"},
            "draft_only_for_review", "draft"),
           ("get_packet", {"story": STORY, "role": "qa", "chapter": 2, "draft": "d2-first"},
            "draft_not_under_review", "draft"),
           ("propose_canon", {**RULE, "text": "x" * (5 * 1024 * 1024)}, "invalid_field", "text"),
           ("propose_canon", {**RULE, "kind": "spaceship"}, "invalid_field", "kind"),
           ("propose_canon", {**RULE, "fields": {"state": 7}}, "state_must_be_text", "fields.state"),
           ("search", {"collection": "nope", "query": "lamp"}, "unknown_collection", "collection"),
           ("search", {"collection": f"story:{STORY}", "query": "   "}, "invalid_field", "query"),
           ("audit_packet", {"packet_id": "pkt_nope"}, "unknown_packet", "packet_id"),
           ("check_draft", {"story": STORY, "draft": "nope"}, "unknown_draft", "draft_id"),
           ("check_draft", {"story": STORY, "draft": "x" * 201}, "invalid_field", "draft"),
           ("list_canon", {"story": STORY}, "invalid_field", "as_of")]

    async def calls(session: Client) -> list[Any]:
        answers = [await session.call_tool(name, arguments) for name, arguments, _, _ in bad]
        answers.append(await session.call_tool("list_stories", {}))  # the session survived them all
        return answers

    end = in_log(server, admin)
    for client in (http(server, author), stdio(url, author)):
        answers = run(client, calls)
        for (name, _, code, field), answer in zip(bad, answers):
            failed = error(answer)
            assert failed["code"] == code, (name, failed)
            if field is not None:
                assert failed["field"] == field, (name, failed)
            assert "x" * 100 not in failed["message"]  # the value is never echoed back
        assert not answers[-1].is_error
    assert in_log(server, admin) == end
