"""``GET /v1/events/stream`` against a real ``canon serve``, on SQLite and PostgreSQL: resuming
with Last-Event-ID misses and repeats nothing; a connected client gets new entries at once
(another process's write too); the same scoping as ``GET /v1/events``; bad positions refused
before anything is streamed; open streams take no thread from the other routes."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli_runner import canon
from tests.conftest import STORES, _store
from tests.e2e.test_http_server import STORY, Server, admin_key, demo_commands

PATH = "/v1/events/stream"
PROBLEM = "application/problem+json"


@dataclass
class Message:
    id: int
    event: str
    data: dict[str, Any]


class Stream:
    """One open connection to the stream, read a message at a time (comments and the
    ``retry`` field kept aside)."""

    def __init__(self, http: httpx.Client, token: str, last_event_id: int | str | None = None, **params: Any) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self._context = http.stream("GET", PATH, params=params, headers=headers)
        self.response = self._context.__enter__()
        self.retry: int | None = None
        self.comments: list[str] = []
        self._chunks = self.response.iter_bytes()
        self._buffer = b""

    def _line(self) -> str:
        while b"\n" not in self._buffer:
            self._buffer += next(self._chunks)  # a read timeout of the client fails the test, never hangs it
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8")

    def next(self) -> Message:
        fields: dict[str, str] = {}
        while True:
            line = self._line()
            if line == "":
                if "data" in fields:
                    return Message(int(fields["id"]), fields["event"], json.loads(fields["data"]))
                fields = {}
                continue
            if line.startswith(":"):
                self.comments.append(line)
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "retry":
                self.retry = int(value)
            else:
                assert name not in fields, f"field {name!r} twice in one message"
                fields[name] = value

    def close(self) -> None:
        self._context.__exit__(None, None, None)

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


@dataclass
class Live:
    server: Server
    url: str
    token: str  # admin
    http: httpx.Client
    end: int  # the log's end after the demo

    def post(self, commands: Any, token: str | None = None) -> int:
        """Apply through the API; the log's end after."""
        r = self.http.post("/v1/commands", json=commands, headers=_auth(token or self.token))
        assert r.status_code == 200, r.text
        return r.json()["position"]

    def key(self, scope: str, *stories: str) -> str:
        r = self.http.post("/v1/keys", json={"scope": scope, "stories": list(stories)}, headers=_auth(self.token))
        assert r.status_code == 201, r.text
        return r.json()["token"]

    def events(self, token: str | None = None, **params: Any) -> list[dict[str, Any]]:
        """Every entry ``GET /v1/events`` gives this key, page by page."""
        found: list[dict[str, Any]] = []
        after = 0
        while True:
            page = self.http.get("/v1/events", params={**params, "after": after, "limit": 37},
                                 headers=_auth(token or self.token))
            assert page.status_code == 200, page.text
            body = page.json()
            found += body["events"]
            if body["next_after"] == body["end"]:
                return found
            assert body["next_after"] > after
            after = body["next_after"]


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _plan(command_id: str, chapter: int, story: str = STORY) -> dict[str, Any]:
    return {"type": "plan_chapter", "command_id": command_id, "story_id": story, "chapter": chapter,
            "volume": 1, "goals": [f"goal of {command_id}"]}


@contextmanager
def serving(url: str, log: Path) -> Iterator[Live]:
    """An admin key, a server on ``url``, the demo applied through it; its log checked once stopped."""
    token = admin_key(url)
    server = Server(url, log)
    try:
        with httpx.Client(base_url=server.base, timeout=10) as http:
            r = http.post("/v1/commands", json=demo_commands(), headers=_auth(token))
            assert r.status_code == 200, r.text
            yield Live(server, url, token, http, r.json()["position"])
    finally:
        server.stop()
    text = server.log.read_text()
    assert "Traceback" not in text and token not in text, text[-3000:]


@pytest.fixture
def live(store_url: str, tmp_path: Path) -> Iterator[Live]:
    """A server of the test's own: for a test whose checks count from position 1 of a log that
    only the demo filled (resuming), count the server's finished streams, or stop it."""
    with serving(store_url, tmp_path / "server.log") as fresh:
        yield fresh


@pytest.fixture(scope="module", params=STORES)
def resume_then_stop_live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """``live`` for two tests, one server per store for both: the resuming test, which must be
    its first user (it counts from position 1 of a log only the demo filled: it says so if not),
    and then the test that stops it (the module's last)."""
    folder = tmp_path_factory.mktemp("resume")
    for url in _store(request.param, folder / "canon.db"):
        with serving(url, folder / "server.log") as fresh:
            yield fresh


@pytest.fixture(scope="module")
def module_live(module_store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with serving(module_store_url, tmp_path_factory.mktemp("stream") / "server.log") as shared:
        yield shared


@pytest.fixture
def shared_live(module_live: Live) -> Iterator[Live]:
    """The module's server (one per store), for a test that reads the stream from where the
    log ends when it starts (``end`` is read then) and writes only entries of its own; the
    server's log is checked after each test as well as once it stops."""
    r = module_live.http.get("/v1/events", params={"limit": 1}, headers=_auth(module_live.token))
    assert r.status_code == 200, r.text
    module_live.end = r.json()["end"]
    began = module_live.server.log.stat().st_size
    yield module_live
    said = module_live.server.log.read_bytes()[began:].decode(errors="replace")
    assert "Traceback" not in said and module_live.token not in said, said[-3000:]


def _stream_requests_done(live: Live) -> int:
    """Stream requests the server has finished (its request histogram, by route)."""
    text = live.http.get("/metrics", headers=_auth(live.token)).text
    return sum(int(float(n)) for n in re.findall(
        r'canon_http_request_seconds_count\{[^}]*route="/v1/events/stream"[^}]*status="200"[^}]*\} (\S+)', text))


def test_reconnecting_with_last_event_id_misses_nothing_and_repeats_nothing(resume_then_stop_live: Live) -> None:
    live = resume_then_stop_live
    assert live.server.process.poll() is None and live.events()[-1]["position"] == live.end, \
        "this test must be the server's first user: the log holds only what serving() wrote"
    rng = random.Random(f"sse-resume-{live.url.split(':')[0]}")
    received: list[Message] = []
    end = live.end
    appended = at_tail = 0
    for n in range(50):
        last = received[-1].id if received else None
        at_tail += last == end
        with Stream(live.http, live.token, last) as stream:
            assert stream.response.status_code == 200, stream.response.read()
            assert stream.response.headers["content-type"].startswith("text/event-stream")
            assert stream.response.headers["cache-control"] == "no-cache"
            assert stream.response.headers["x-accel-buffering"] == "no"
            reads = rng.randint(0, 9)
            for _ in range(reads):
                if (received[-1].id if received else 0) >= end:  # caught up: append while connected
                    appended += 1
                    end = live.post(_plan(f"resume-live-{appended}", 100 + appended))
                received.append(stream.next())
            if reads:
                assert stream.retry == 1000  # sent first
        if n % 6 == 5:  # and between connections
            appended += 1
            end = live.post(_plan(f"resume-between-{appended}", 100 + appended))
    with Stream(live.http, live.token, received[-1].id if received else None) as stream:
        while not received or received[-1].id < end:
            received.append(stream.next())

    expected = live.events()
    ids = [m.id for m in received]
    assert ids == [e["position"] for e in expected]  # in order, each once: no gap, no duplicate
    assert ids == list(range(1, end + 1))  # every position of the log, once
    assert [m.data for m in received] == expected  # the same JSON as GET /v1/events
    assert all(m.event == m.data["type"] and m.id == m.data["position"] for m in received)
    assert any(m.event.startswith("ApiKey") for m in received)  # an admin gets every entry
    assert at_tail >= 3 and appended >= 8, (at_tail, appended)  # some reconnects were at the live tail


def test_a_connected_client_gets_new_entries_at_once_and_a_disconnect_ends_the_stream(
        live: Live, tmp_path: Path) -> None:
    done = _stream_requests_done(live)
    with Stream(live.http, live.token, live.end) as stream:
        began = time.monotonic()
        position = live.post(_plan("tail-http", 200))
        first = stream.next()
        assert time.monotonic() - began < 2
        assert first.id == live.end + 1 and first.data["story_id"] == STORY
        while first.id < position:
            first = stream.next()
        # A write by another process: the CLI, on the same store.
        commands = tmp_path / "more.jsonl"
        commands.write_text(json.dumps(_plan("tail-cli", 201)) + "\n")
        applied = canon("--db", live.url, "apply", str(commands), "--format", "json")
        committed = time.monotonic()
        assert applied.returncode == 0, applied.stderr
        results = [json.loads(line) for line in applied.stdout.splitlines()]
        assert [r["status"] for r in results] == ["applied"]
        seen = [stream.next()]
        while seen[-1].id < results[-1]["position"]:
            seen.append(stream.next())
        assert time.monotonic() - committed < 2
        assert seen[0].id == position + 1 and seen[-1].id == results[-1]["position"]
        assert any(m.data["data"].get("command_id") == "tail-cli" for m in seen)
    # The server notices the disconnect (between two short waits) and ends that request.
    deadline = time.monotonic() + 5
    while _stream_requests_done(live) == done and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _stream_requests_done(live) == done + 1


def test_open_streams_leave_the_other_routes_their_threads(shared_live: Live) -> None:
    live = shared_live  # the module's server
    # More streams waiting at the tail than the request threadpool has threads (40).
    with httpx.Client(base_url=live.server.base, timeout=10,
                      limits=httpx.Limits(max_connections=60, max_keepalive_connections=0)) as many:
        streams = [Stream(many, live.token, live.end) for _ in range(45)]
        try:
            assert all(s.response.status_code == 200 for s in streams)
            began = time.monotonic()
            for _ in range(5):  # each would wait for a stream's wait to end if they held the threads
                assert live.http.get("/v1/stories", headers=_auth(live.token)).status_code == 200
            assert time.monotonic() - began < 1.0  # about 0.03 s; 2 s with the waits on the request threads
            began = time.monotonic()
            position = live.post(_plan("many-1", 300))
            for s in streams:
                m = s.next()
                assert m.id == live.end + 1
                while m.id < position:
                    m = s.next()
            assert time.monotonic() - began < 5
        finally:
            for s in streams:
                s.close()


def test_the_stream_is_scoped_as_the_events_are(shared_live: Live) -> None:
    live = shared_live  # the module's server
    no_key = live.http.get(PATH)
    assert no_key.status_code == 401 and no_key.headers["content-type"] == PROBLEM
    worker = live.http.get(PATH, headers=_auth(live.key("worker")))
    assert worker.status_code == 403 and worker.json()["code"] == "forbidden"
    live.post([{"type": "start_story", "command_id": "other-start", "story_id": "other", "title": "Other",
                "style_guardrails": [], "output_contract": "prose"}, _plan("other-plan-1", 1, "other")])

    limited = live.key("author", STORY)
    hidden = live.http.get(PATH, params={"story": "other"}, headers=_auth(limited))
    unknown = live.http.get("/v1/stories/other", headers=_auth(limited))
    assert hidden.status_code == unknown.status_code == 404 and hidden.headers["content-type"] == PROBLEM
    assert hidden.json()["code"] == unknown.json()["code"] == "unknown_story"

    expected = live.events(limited)
    assert expected and {e["story_id"] for e in expected} == {STORY}
    assert len(expected) < len(live.events())  # the other story's entries and the keys' are not among them
    with Stream(live.http, limited) as stream:
        assert [stream.next().data for _ in expected] == expected
        # at the live tail: the other story's entries are skipped, this story's arrive
        skipped = live.post(_plan("other-plan-2", 2, "other"))
        mine = live.post(_plan("mine-plan", 400))
        m = stream.next()
        assert skipped < m.id <= mine and m.data["story_id"] == STORY
    with Stream(live.http, limited, story=STORY) as stream:
        assert [stream.next().data for _ in expected] == expected

    author = live.key("author")
    expected = live.events(author)
    admin = live.events()
    assert not any(e["type"].startswith("ApiKey") for e in expected)
    assert [e for e in admin if not e["type"].startswith("ApiKey")] == expected
    with Stream(live.http, author) as stream:
        assert [stream.next().data for _ in expected] == expected
        live.key("worker")  # a key's events at the tail, then a story's
        after_key = live.events()[-1]["position"]
        assert live.events()[-1]["type"].startswith("ApiKey")
        mine = live.post(_plan("after-key-plan", 401))
        m = stream.next()
        assert after_key < m.id <= mine and not m.event.startswith("ApiKey")


def test_a_bad_position_is_refused_before_anything_is_streamed(shared_live: Live) -> None:
    live = shared_live  # the module's server
    def refused(params: dict[str, Any], last_event_id: str | bytes | None, code: str, field: str) -> None:
        headers = {**_auth(live.token), **({"Last-Event-ID": last_event_id} if last_event_id is not None else {})}
        r = live.http.get(PATH, params=params, headers=headers, timeout=5)  # a stream would time out here
        assert r.status_code == 422, (params, last_event_id, r.text)
        assert r.headers["content-type"] == PROBLEM
        body = r.json()
        assert body["code"] == code and body["field"] == field, body
        assert "id:" not in r.text and "retry:" not in r.text

    for bad in ("abc", "-1", "1.5", "+3", "0x10", "12 13", str(2**31), "9" * 30, "\u00b2".encode("latin-1")):
        refused({}, bad, "invalid_last_event_id", "Last-Event-ID")
    refused({}, str(live.end + 1), "position_beyond_log", "Last-Event-ID")
    refused({"after": 0}, str(live.end + 1000), "position_beyond_log", "Last-Event-ID")  # the header wins
    refused({"after": live.end + 1}, None, "position_beyond_log", "after")
    refused({"after": -1}, None, "invalid_field", "after")
    # Last-Event-ID wins over after; both give the entries after them.
    with Stream(live.http, live.token, 3, after=live.end) as stream:
        assert stream.next().id == 4
    with Stream(live.http, live.token, after=live.end - 2) as stream:
        assert [stream.next().id, stream.next().id] == [live.end - 1, live.end]
    with Stream(live.http, live.token, live.end) as stream:  # at the end: nothing until an append
        position = live.post(_plan("bad-input-plan", 500))
        assert stream.next().id == live.end + 1 <= position


def test_stopping_the_server_ends_open_streams_at_once(resume_then_stop_live: Live) -> None:
    live = resume_then_stop_live  # its server is stopped here: no test may take it after this one
    live.end = live.events()[-1]["position"]  # the log's end now (the resuming test appended)
    stream = Stream(live.http, live.token, live.end)
    try:
        assert stream.response.status_code == 200
        began = time.monotonic()
        live.server.stop()  # SIGTERM
        assert time.monotonic() - began < 5  # the graceful shutdown would wait 10 s for an open stream
    finally:
        stream.close()
