"""``canon serve`` facing clients that try to knock it over (issue 37), as a real process on a
loopback port, on both stores (PostgreSQL behind a proxy the test can cut: the store going
away without stopping the server every other test shares).

- bodies: refused by size before they are read, whoever sends them; a stranger's body is
  never read; the server's memory stays flat;
- the event loop: NULs, disconnects mid-body and MCP calls while the store is down never
  stall ``/healthz`` (p99 <= 50 ms);
- the store gone: every request answers 503 ``store_unavailable`` at once, with
  ``Retry-After``, and the server serves again when it is back, with no restart;
- revocation reaches open event streams and ``canon mcp`` sessions;
- ``--open``: no other Host, no other Origin, no cross-site "simple" POST;
- slow clients: headers and bodies have deadlines.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from canon_ledger.infrastructure.http.client import CanonClient
from tests.cli_runner import canon
from tests.conftest import create_database, drop_database
from tests.e2e.test_http_server import STORY, Server, admin_key, demo_commands
from tests.e2e.test_mcp import run, stdio
from tests.store_proxy import StoreProxy

TIMEOUTS = {"CANON_HEADER_TIMEOUT": "1.5", "CANON_BODY_TIMEOUT": "1.5"}


class Served:
    """A server on the demo story, its keys, and (PostgreSQL) the proxy in front of its store."""

    def __init__(self, url: str, server: Server, tokens: dict[str, str], proxy: StoreProxy | None) -> None:
        self.url, self.server, self.tokens, self.proxy = url, server, tokens, proxy
        self.host, self.port = "127.0.0.1", server.port

    def call(self, method: str, path: str, token: str | None = None, **kw: Any) -> httpx.Response:
        headers = {**kw.pop("headers", {}), **({"Authorization": f"Bearer {token}"} if token else {})}
        return httpx.request(method, self.server.base + path, headers=headers, timeout=30, **kw)

    def rss(self) -> int:
        """The server process's resident memory, in bytes."""
        status = Path(f"/proc/{self.server.process.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) * 1024


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp(f"hardening-{request.param}")
    proxy = dropped = None
    if request.param == "sqlite":
        url = f"sqlite:///{folder / 'canon.db'}"
    else:
        direct, admin = create_database()
        dropped = (direct, admin)
        proxy, url = StoreProxy.in_front_of(direct)
    try:
        assert canon("--db", url, "init").returncode == 0
        tokens = {"admin": admin_key(url, "--name", "the-admin")}
        for scope in ("author", "worker"):
            made = canon("--db", url, "key", "create", "--scope", scope, "--name", f"the-{scope}", "--format", "json")
            tokens[scope] = json.loads(made.stdout)["token"]
        server = Server(url, folder / "server.log", env=TIMEOUTS)
        try:
            with CanonClient(server.base, tokens["admin"]) as client:
                applied = client.apply(demo_commands())
                # the server's worker indexes the demo first: the loop is measured on a settled server
                client.wait_indexed(applied["position"])
            yield Served(url, server, tokens, proxy)
        finally:
            server.stop()
    finally:
        if proxy is not None:
            proxy.close()
        if dropped is not None:
            drop_database(*dropped)


def raw(served: Served, head: str, body: bytes = b"", *, wait: float = 5.0) -> tuple[int, float]:
    """Send ``head`` (and ``body``) on a socket of its own; (the status answered, seconds to it).
    0 when the server closed the connection without an answer."""
    began = time.monotonic()
    with socket.create_connection((served.host, served.port), timeout=wait) as s:
        s.sendall(head.encode("latin-1") + body)
        try:
            first = s.recv(4096)
        except (TimeoutError, ConnectionResetError):
            return 0, time.monotonic() - began
    took = time.monotonic() - began
    return (int(first.split(b" ", 2)[1]) if first.startswith(b"HTTP/1.1 ") else 0), took


def request_head(method: str, path: str, token: str | None, length: int | None, *,
                 content_type: str = "application/json", extra: str = "") -> str:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    return "\r\n".join(lines) + "\r\n" + extra + "\r\n"


BODY_ROUTES = [  # every route that takes a body, with its limit
    ("/v1/commands", 64 * 1024 * 1024), ("/v1/keys", 64 * 1024),
    ("/v1/collections/guild/documents", 64 * 1024 * 1024), ("/mcp", 8 * 1024 * 1024),
    ("/login", 64 * 1024), ("/logout", 64 * 1024), (f"/stories/{STORY}/review", 64 * 1024),
    ("/v1/compile", 64 * 1024), ("/v1/rebuild", 64 * 1024)]


def test_bodies_are_bounded_before_they_are_read_and_a_strangers_is_never_read(served: Served) -> None:
    before = served.rss()
    for path, limit in BODY_ROUTES:
        for token in (None, "cl_not-a-key", served.tokens["admin"]):
            # a Content-Length past the limit: answered at once, the body never sent
            status, took = raw(served, request_head("POST", path, token, limit + 1))
            assert (status, path, token) == (413, path, token) and took < 2, took
    # a body within the limit but with no key, or a bad one: 401 before a byte of it is read
    for path in ("/v1/commands", "/v1/keys", "/v1/collections/guild/documents", "/mcp"):
        for token in (None, "cl_not-a-key"):
            status, took = raw(served, request_head("POST", path, token, 60_000))
            assert (status, path) == (401, path) and took < 2, took
    # 200 MB streamed with no key, chunked: refused without being read, and memory stays flat
    for path in ("/v1/keys", "/v1/commands", "/v1/collections/guild/documents"):
        with socket.create_connection((served.host, served.port), timeout=10) as s:
            s.sendall(request_head("POST", path, None, None).encode())
            chunk = b"%x\r\n%s\r\n" % (1 << 20, b"x" * (1 << 20))
            sent = 0
            try:
                for _ in range(200):
                    s.sendall(chunk)
                    sent += 1
            except (BrokenPipeError, ConnectionResetError):
                pass
            answer = s.recv(4096)
            assert answer.startswith(b"HTTP/1.1 401"), answer[:100]
    # an admin streaming past a route's limit (chunked, no length) is cut off at the limit
    with socket.create_connection((served.host, served.port), timeout=10) as s:
        s.sendall(request_head("POST", "/v1/keys", served.tokens["admin"], None).encode())
        try:
            for _ in range(4):
                s.sendall(b"%x\r\n%s\r\n" % (1 << 16, b"x" * (1 << 16)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 413") and b"application/problem+json" in answer, answer[:300]
    assert served.rss() - before < 50 * 1024 * 1024, (before, served.rss())
    assert served.call("GET", "/v1/stories", served.tokens["worker"]).status_code == 200


def test_a_json_route_takes_only_json(served: Served) -> None:
    command = json.dumps({"type": "record_chapter_summary", "command_id": "ct-1", "story_id": STORY, "chapter": 4,
                          "text": "Summary."})
    for media in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        r = served.call("POST", "/v1/commands", served.tokens["admin"], content=command,
                        headers={"Content-Type": media})
        assert r.status_code == 415 and r.json()["code"] == "unsupported_media_type", r.text
    r = served.call("POST", "/v1/commands", served.tokens["admin"], content=command,
                    headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200, r.text


class Health:
    """``/healthz`` asked every 20 ms on a thread, on a connection of its own, while a test
    does its worst; the latencies, in ms."""

    def __init__(self, served: Served) -> None:
        self.base = served.server.base
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=60) as client:
            while not self._stop.is_set():
                began = time.perf_counter()
                assert client.get("/healthz").status_code == 200
                self.times.append((time.perf_counter() - began) * 1000)
                self._stop.wait(0.02)

    def __enter__(self) -> Health:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join()

    def p99(self) -> float:
        # The benchmarks' p99 (benchmarks/common.percentiles: inclusive, between the closest
        # ranks). The default ("exclusive") reads past the last rank of a short series: with 161
        # samples its p99 was 0.38 of the way from the largest-but-one (14 ms) to the largest (one
        # scheduler hiccup of 114 ms on a shared 2-core VM), and failed a goal the series met.
        return statistics.quantiles(self.times, n=100, method="inclusive")[98] if len(self.times) >= 20 \
            else max(self.times)


NUL_REQUESTS = [  # (path, expected status): a NUL in a path or a query value
    (f"/v1/stories/{STORY}%00", 404), (f"/v1/stories/{STORY}/canon?kind=%00", 422),
    (f"/v1/stories/{STORY}/canon/character/il%00se", 404), (f"/v1/stories/{STORY}/packet?role=qa&chapter=5&draft=d%00", 422),
    ("/v1/lint?collection=a%00b", 422), (f"/stories/{STORY}/canon?kind=%00", 422), (f"/stories/%00{STORY}/canon", 404),
    (f"/v1/collections/guild/search?q=lamps%00", 422)]


def test_no_client_can_stall_the_event_loop(served: Served) -> None:
    worker = served.tokens["worker"]
    with Health(served) as health:
        ends = time.monotonic() + 5  # long enough for ~250 health samples: p99 is not one outlier
        while time.monotonic() < ends:
            for path, status in NUL_REQUESTS:
                r = served.call("GET", path, worker)
                assert r.status_code == status, (path, r.text)
                assert r.headers["content-type"] == "application/problem+json"
            for _ in range(5):  # a login that promises a body and leaves
                with socket.create_connection((served.host, served.port)) as s:
                    s.sendall(request_head("POST", "/login", None, 1000,
                                           content_type="application/x-www-form-urlencoded").encode() + b"key=cl_")
            for draft in ("d\x00", "x"):  # MCP with a NUL in an argument: a structured error, not a 500
                call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_packet", "arguments": {
                    "story": STORY, "role": "qa", "chapter": 5, "draft": draft}}}
                r = served.call("POST", "/mcp", worker, json=call,
                                headers={"Accept": "application/json, text/event-stream"})
                assert r.status_code == 200, r.text
                assert r.json()["result"]["isError"] is True, r.text
    log = served.server.log.read_text()
    assert "internal error" not in log and "Traceback" not in log, log[-3000:]
    assert health.p99() <= 50, (len(health.times), [round(t) for t in sorted(health.times)[-5:]])


def sse(served: Served, token: str, seen: list[int], ended: threading.Event) -> threading.Thread:
    def follow() -> None:
        try:
            with httpx.stream("GET", served.server.base + f"/v1/events/stream?story={STORY}&after=1000000000"
                              .replace("1000000000", str(served.call("GET", "/v1/events?limit=1", served.tokens["admin"])
                                                            .json()["end"])),
                              headers={"Authorization": f"Bearer {token}"}, timeout=60) as response:
                assert response.status_code == 200
                for line in response.iter_lines():
                    if line.startswith("id: "):
                        seen.append(int(line[4:]))
        finally:
            ended.set()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    return thread


def summary(n: int) -> dict[str, Any]:
    return {"type": "record_chapter_summary", "command_id": f"rev-{n}-{time.monotonic_ns()}", "story_id": STORY,
            "chapter": 4, "text": f"Summary {n}."}


def test_revocation_ends_an_open_event_stream(served: Served) -> None:
    name = f"streamer-{time.monotonic_ns()}"
    made = canon("--db", served.url, "key", "create", "--scope", "author", "--name", name, "--format", "json")
    token = json.loads(made.stdout)["token"]
    seen: list[int] = []
    ended = threading.Event()
    sse(served, token, seen, ended)
    admin = served.tokens["admin"]
    time.sleep(0.5)
    before = served.call("POST", "/v1/commands", admin, json=summary(1)).json()["position"]
    deadline = time.monotonic() + 10
    while before not in seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert before in seen  # the stream delivers while its key works
    assert canon("--db", served.url, "key", "revoke", name).returncode == 0  # another process: the TTL applies
    assert ended.wait(6), "the stream of a revoked key stayed open"
    after = served.call("POST", "/v1/commands", admin, json=summary(2)).json()["position"]
    time.sleep(0.5)
    assert after not in seen


def test_revocation_reaches_an_open_mcp_stdio_session(served: Served) -> None:
    name = f"agent-{time.monotonic_ns()}"
    made = canon("--db", served.url, "key", "create", "--scope", "author", "--name", name, "--format", "json")
    token = json.loads(made.stdout)["token"]

    async def session(client: Any) -> tuple[Any, Any]:
        first = await client.call_tool("list_stories", {})
        assert canon("--db", served.url, "key", "revoke", name).returncode == 0
        await asyncio.sleep(2.5)  # the revocation delay: Keys.CHECK_TTL
        proposed = await client.call_tool("propose_canon", {
            "story": STORY, "kind": "world_rule", "key": "revoked-rule", "name": "A rule", "text": "Never.",
            "valid_from": 1})
        return first, proposed

    first, proposed = run(stdio(served.url, token), session)
    assert not first.is_error
    assert proposed.is_error and proposed.structured_content["error"]["code"] == "invalid_key", proposed
    proposals = served.call("GET", f"/v1/stories/{STORY}/proposals", served.tokens["admin"]).json()
    assert "revoked-rule" not in json.dumps(proposals)
    # over HTTP every request is checked again: the revoked key is refused at the door
    r = served.call("POST", "/mcp", token, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    headers={"Accept": "application/json, text/event-stream"})
    assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"


def test_slow_clients_are_timed_out(served: Served) -> None:
    # headers a byte at a time, and a connection that sends nothing: closed at the header deadline (1.5 s)
    sockets = []
    for n in range(20):
        s = socket.create_connection((served.host, served.port), timeout=10)
        if n % 2 == 0:
            s.sendall(b"GET /healthz HTTP/1.1\r\n")
        sockets.append(s)
    began = time.monotonic()
    for _ in range(6):
        for s in sockets[::2]:
            try:
                s.sendall(b"X")
            except OSError:
                pass
        time.sleep(0.5)
    for s in sockets:
        s.settimeout(max(0.1, 6 - (time.monotonic() - began)))
        try:
            assert s.recv(100) == b""  # closed by the server, no answer
        except ConnectionResetError:
            pass
        s.close()
    assert time.monotonic() - began < 6
    # a body that stalls: 408 at the body deadline
    status, took = raw(served, request_head("POST", "/v1/commands", served.tokens["admin"], 100), b'{"type": ')
    assert status == 408 and 1.0 < took < 5, (status, took)
    assert served.call("GET", "/healthz").status_code == 200


@pytest.mark.postgres
@pytest.mark.parametrize("served", ["postgres"], indirect=True)  # the embedded store cannot be taken away
def test_a_store_that_goes_away_is_503_at_once_and_serving_resumes_when_it_is_back(served: Served) -> None:
    assert served.proxy is not None
    worker, admin = served.tokens["worker"], served.tokens["admin"]
    requests = [("GET", f"/v1/stories/{STORY}/packet?role=writer&chapter=5&budget=3001", worker, None),
                ("POST", "/v1/commands", admin, summary(3)), ("GET", "/v1/stories", worker, None),
                ("GET", f"/v1/stories/{STORY}/canon?as_of=5", worker, None), ("GET", "/readyz", worker, None),
                ("GET", "/v1/events?limit=5", admin, None), ("GET", f"/stories/{STORY}/canon", None, None)]
    mcp = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_stories", "arguments": {}}}
    served.proxy.cut()
    try:
        with Health(served) as health:
            ends = time.monotonic() + 4
            while time.monotonic() < ends:
                for method, path, token, body in requests:
                    began = time.monotonic()
                    r = served.call(method, path, token, json=body)
                    took = time.monotonic() - began
                    if path.startswith("/stories/"):
                        assert r.status_code in (303, 503), r.text  # a page: the login first
                        continue
                    assert r.status_code == 503 and r.json()["code"] == "store_unavailable", (path, r.text)
                    assert r.headers["retry-after"] == "1" and took < 2, (path, took)
                r = served.call("POST", "/mcp", worker, json=mcp, headers={"Accept": "application/json, text/event-stream"})
                assert r.status_code == 503, r.text
                time.sleep(0.3)
        assert health.p99() <= 50, (len(health.times), [round(t) for t in sorted(health.times)[-5:]])
    finally:
        served.proxy.restore()
    deadline = time.monotonic() + 15
    while served.call("GET", "/v1/stories", worker).status_code != 200:
        assert time.monotonic() < deadline, "the server did not serve again once the store was back"
        time.sleep(0.2)
    assert served.call("GET", f"/v1/stories/{STORY}/packet?role=writer&chapter=5", worker).status_code == 200
    assert served.call("POST", "/v1/commands", admin, json=summary(4)).status_code == 200


def test_an_open_server_answers_only_its_own_pages(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'open.db'}"
    assert canon("--db", url, "init").returncode == 0
    server = Server(url, tmp_path / "server.log", "--open")
    try:
        base = server.base
        rebound = httpx.get(base + "/v1/stories", headers={"Host": "attacker.example"})
        assert rebound.status_code == 403 and rebound.json()["code"] == "host_not_allowed"
        minted = httpx.post(base + "/v1/keys", json={"scope": "admin"}, headers={"Host": "attacker.example:8750"})
        assert minted.status_code == 403
        cross = httpx.post(base + "/v1/keys", json={"scope": "admin"}, headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403 and cross.json()["code"] == "cross_origin"
        command = json.dumps({"type": "start_story", "command_id": "o-1", "story_id": "o", "title": "O",
                              "style_guardrails": [], "output_contract": "Prose."})
        simple = httpx.post(base + "/v1/commands", content=command, headers={"Content-Type": "text/plain"})
        assert simple.status_code == 415
        assert httpx.get(base + "/v1/stories").json()["stories"] == []  # nothing of the above was applied
        for host in ("localhost", "127.0.0.1", f"127.0.0.1:{server.port}", f"localhost:{server.port}"):
            assert httpx.get(base + "/v1/stories", headers={"Host": host}).status_code == 200, host
        ok = httpx.post(base + "/v1/keys", json={"scope": "worker"}, headers={"Origin": f"http://localhost:{server.port}"})
        assert ok.status_code == 201, ok.text
        assert ok.json()["minted_open"] is True  # a key minted with no key at the door says so
        listed = {k["name"]: k for k in httpx.get(base + "/v1/keys").json()["keys"]}
        assert listed[ok.json()["name"]]["minted_open"] is True
    finally:
        server.stop()
